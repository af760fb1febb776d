#!/usr/bin/env python3
"""Regenerate the LLaMA decoder fixtures under tests/decoder_fixtures/ and their goldens.

    python python/gen_fixtures_llama.py                 # both, into tests/decoder_fixtures/
    python python/gen_fixtures_llama.py --out /tmp/fx   # elsewhere

Decoder fixtures live outside tests/fixtures/ (the encoder tests replay every
tests/fixtures/*/golden.json through the encoder runner). Fixed seeds, float32, eager
attention: reruns are byte-identical. Fixtures:

- `llama_gqa`: hidden 64, 4 heads, 2 KV heads (GQA), 2 layers, vocab 128, untied lm_head,
  rope_theta 10000.
- `llama_mqa`: hidden 48, 6 heads (head_dim 8), 1 KV head (MQA), 3 layers, vocab 96, tied
  embeddings (table scaled 0.2), rope_theta 500000, rms_norm_eps 1e-5.
- `llama_bf16`: BF16 storage (the engine keeps the weights bf16 in memory and widens them
  in its GEMM kernels), hidden 48, 6 heads, 3 KV heads, untied head. The golden runs the
  bf16-rounded weights in float32 (`model.float()`: an exact widening).
- `llama_sharded`: float32 weights in shards plus `model.safetensors.index.json`
  (`max_shard_size`; six files), hidden 64, 8 heads, 2 KV heads (GQA 4:1), tied embeddings.

Each golden.json (format kin-infer-golden/1, tol 1e-4) has `logits` cases (one row of vocab
logits per prompt position) and `generate` cases (greedy, max_new_tokens 8, no stop on EOS).
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
    "llama_gqa": dict(
        seed=1001,
        config=dict(
            vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
        ),
        prompt_lengths=[1, 7, 19],
    ),
    "llama_mqa": dict(
        seed=1002,
        config=dict(
            vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
            num_attention_heads=6, num_key_value_heads=1, max_position_embeddings=48,
            rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
        ),
        prompt_lengths=[2, 11, 30],
    ),
    "llama_bf16": dict(
        seed=1003,
        dtype="bf16",
        config=dict(
            vocab_size=80, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=40,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
        ),
        prompt_lengths=[3, 13],
    ),
    "llama_sharded": dict(
        seed=1004,
        max_shard_size="40KB",
        config=dict(
            vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=40,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
        ),
        prompt_lengths=[4, 17],
    ),
}


def build(torch, name, fx, out_root):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(fx["config"])
    theta = cfg.pop("rope_theta")
    config = LlamaConfig(
        **cfg,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        bos_token_id=1, eos_token_id=2, pad_token_id=0,
        attention_bias=False, mlp_bias=False, hidden_act="silu",
    )
    config._attn_implementation = "eager"
    torch.manual_seed(fx["seed"])
    model = LlamaForCausalLM(config).float().eval()
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
            else:
                p.copy_(r / (p.shape[-1] ** 0.5))
        if config.tie_word_embeddings:
            model.tie_weights()

    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    if fx.get("dtype") == "bf16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(d, safe_serialization=True,
                          max_shard_size=fx.get("max_shard_size", "5GB"))
    # Goldens in float32 on exactly the stored values (bf16 widens exactly). A fresh model
    # takes the widened weights: `.to(bfloat16)` also rounded the rotary `inv_freq` buffer,
    # which a checkpoint does not carry (the engine computes it in f32, as transformers does).
    if fx.get("dtype") == "bf16":
        stored = {k: v.float() for k, v in model.state_dict().items()}
        model = LlamaForCausalLM(config).float().eval()
        model.load_state_dict(stored)
    # generation_config.json carries a transformers version and sampling defaults that are
    # not part of these fixtures.
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
                 extra=dict(generator="python/gen_fixtures_llama.py", fixture=name,
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
