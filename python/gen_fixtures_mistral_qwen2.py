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

import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import decoder_fixture  # noqa: E402
from decoder_fixture import (  # noqa: E402
    drop_generation_config, generate_case, logits_case, write_decoder_golden,
)

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
    drop_generation_config(d)

    rng = random.Random(fx["seed"])
    vocab = cfg["vocab_size"]
    cases = []
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in fx["prompt_lengths"]]
    with torch.no_grad():
        cases += [logits_case(torch, model, ids) for ids in prompts]
        cases += [generate_case(torch, model, ids) for ids in prompts]
    write_decoder_golden(d, TOL, cases, "gen_fixtures_mistral_qwen2.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
