#!/usr/bin/env python3
"""Regenerate the Mistral and Qwen2 decoder fixtures under tests/decoder_fixtures/.

    python python/gen_fixtures_mistral_qwen2.py                 # all, into tests/decoder_fixtures/
    python python/gen_fixtures_mistral_qwen2.py --out /tmp/fx   # elsewhere

Same conventions as python/gen_fixtures_llama.py (fixed seeds, float32, eager attention,
byte-identical reruns, golden format kin-infer-golden/1, tol 1e-4). Fixtures:

- `mistral_sw`: hidden 64, 4 heads, 2 KV heads (GQA), 2 layers, vocab 128, untied head,
  `sliding_window` 4, shorter than the 7-, 19- and 27-token prompts (and the generated tokens).
- `mistral_hd`: hidden 48, 4 heads of an explicit `head_dim` 16 (heads * head_dim != hidden),
  2 KV heads, 2 layers, vocab 96, tied embeddings, `sliding_window` null (full attention),
  rope_theta 1e6.
- `qwen2_bias`: hidden 64, 4 heads, 2 KV heads, 2 layers, vocab 128, q/k/v biases, tied
  embeddings, `use_sliding_window` false.
- `qwen2_sw`: hidden 48, 6 heads, 1 KV head (MQA), 3 layers, vocab 96, q/k/v biases, untied
  head, `use_sliding_window` true with `sliding_window` 5 and `max_window_layers` 1: layer 0
  full, layers 1 and 2 sliding (transformers 5.x writes this as `layer_types`).

Each golden.json has `logits` cases (one row of vocab logits per prompt position) and
`generate` cases (greedy, max_new_tokens 8, no stop on EOS).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from golden_json import f32_list, package_versions, write_golden  # noqa: E402

TOL = 1e-4

FIXTURES = {
    "mistral_sw": dict(
        family="mistral",
        seed=2001,
        config=dict(
            vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
            sliding_window=4,
        ),
        prompt_lengths=[1, 7, 19, 27],
    ),
    "mistral_hd": dict(
        family="mistral",
        seed=2002,
        config=dict(
            vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=48, rms_norm_eps=1e-5, rope_theta=1000000.0,
            tie_word_embeddings=True, sliding_window=None,
        ),
        prompt_lengths=[2, 11, 30],
    ),
    "qwen2_bias": dict(
        family="qwen2",
        seed=2003,
        config=dict(
            vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
            use_sliding_window=False,
        ),
        prompt_lengths=[1, 7, 19],
    ),
    "qwen2_sw": dict(
        family="qwen2",
        seed=2004,
        config=dict(
            vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
            num_attention_heads=6, num_key_value_heads=1, max_position_embeddings=48,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
            use_sliding_window=True, sliding_window=5, max_window_layers=1,
        ),
        prompt_lengths=[3, 19, 26],
    ),
}


def build(torch, name, fx, out_root):
    if fx["family"] == "mistral":
        from transformers import MistralConfig as Config, MistralForCausalLM as Model
    else:
        from transformers import Qwen2Config as Config, Qwen2ForCausalLM as Model

    cfg = dict(fx["config"])
    theta = cfg.pop("rope_theta")
    config = Config(
        **cfg,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        bos_token_id=1, eos_token_id=2, pad_token_id=0, hidden_act="silu",
    )
    config._attn_implementation = "eager"
    torch.manual_seed(fx["seed"])
    model = Model(config).float().eval()
    g = torch.Generator().manual_seed(fx["seed"])
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in pname:
                p.copy_(1.0 + 0.2 * r)
            elif "embed_tokens" in pname:
                # A tied table is also the head: a small scale keeps the residual stream from
                # being dominated by the input token (greedy would just repeat it).
                p.copy_(0.2 * r if config.tie_word_embeddings else r)
            elif pname.endswith(".bias"):
                p.copy_(0.5 * r)
            else:
                p.copy_(r / (p.shape[-1] ** 0.5))
        if config.tie_word_embeddings:
            model.tie_weights()

    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model.save_pretrained(d, safe_serialization=True)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)

    rng = random.Random(fx["seed"])
    vocab = cfg["vocab_size"]
    cases = []
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in fx["prompt_lengths"]]
    with torch.no_grad():
        for ids in prompts:
            logits = model(torch.tensor([ids])).logits[0]
            cases.append(dict(name=f"logits_{len(ids)}", kind="logits", input_ids=[ids],
                              expected=[f32_list(logits)]))
        for ids in prompts:
            out = model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=8, min_new_tokens=8, do_sample=False, eos_token_id=None,
                pad_token_id=0, use_cache=True,
            )
            new = out[0, len(ids):].tolist()
            assert len(new) == 8, new
            cases.append(dict(name=f"generate_{len(ids)}", kind="generate", input_ids=[ids],
                              max_new_tokens=8, expected_tokens=[new]))
    write_golden(os.path.join(d, "golden.json"), TOL, cases,
                 extra=dict(generator="python/gen_fixtures_mistral_qwen2.py", fixture=name,
                            versions=package_versions()))
    print(f"wrote {d}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "decoder_fixtures"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, fx in FIXTURES.items():
        if a.only and name not in a.only:
            continue
        build(torch, name, fx, a.out)


if __name__ == "__main__":
    main()
