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

import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, rms_decoder_init, save_decoder, sizes,
    write_decoder_golden,
)

FIXTURES = {
    "mistral_sw": dict(family="mistral", seed=2001, prompt_lengths=[1, 7, 19, 27], config=sizes(
        128, 64, 96, 2, 4, 2, 64, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
        sliding_window=4)),
    "mistral_hd": dict(family="mistral", seed=2002, prompt_lengths=[2, 11, 30], config=sizes(
        96, 48, 80, 2, 4, 2, 48, head_dim=16, rms_norm_eps=1e-5, rope_theta=1000000.0, tie_word_embeddings=True,
        sliding_window=None)),
    "qwen2_bias": dict(family="qwen2", seed=2003, prompt_lengths=[1, 7, 19], config=sizes(
        128, 64, 96, 2, 4, 2, 64, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        use_sliding_window=False)),
    "qwen2_sw": dict(family="qwen2", seed=2004, prompt_lengths=[3, 19, 26], config=sizes(
        96, 48, 80, 3, 6, 1, 48, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
        use_sliding_window=True, sliding_window=5, max_window_layers=1)),
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
    model = random_decoder(torch, Model, config, fx["seed"],
                           rms_decoder_init(config.tie_word_embeddings, bias_scale=0.5))
    d = save_decoder(model, out_root, name)
    prompts = random_prompts(random.Random(fx["seed"]), cfg["vocab_size"], fx["prompt_lengths"])
    cases = decoder_cases(torch, model, prompts)
    write_decoder_golden(d, cases, "gen_fixtures_mistral_qwen2.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
