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

import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, rms_decoder_init, save_decoder, sizes,
    write_decoder_golden,
)

FIXTURES = {
    "llama_gqa": dict(seed=1001, prompt_lengths=[1, 7, 19], config=sizes(
        128, 64, 96, 2, 4, 2, 64, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)),
    "llama_mqa": dict(seed=1002, prompt_lengths=[2, 11, 30], config=sizes(
        96, 48, 80, 3, 6, 1, 48, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True)),
    "llama_bf16": dict(seed=1003, dtype="bf16", prompt_lengths=[3, 13], config=sizes(
        80, 48, 64, 2, 6, 3, 40, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)),
    "llama_sharded": dict(seed=1004, max_shard_size="40KB", prompt_lengths=[4, 17], config=sizes(
        64, 64, 64, 2, 8, 2, 40, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True)),
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
    model = random_decoder(torch, LlamaForCausalLM, config, fx["seed"],
                           rms_decoder_init(config.tie_word_embeddings))
    if fx.get("dtype") == "bf16":
        model = model.to(torch.bfloat16)
    d = save_decoder(model, out_root, name, max_shard_size=fx.get("max_shard_size", "5GB"))
    # Goldens in float32 on exactly the stored values (bf16 widens exactly). A fresh model
    # takes the widened weights: `.to(bfloat16)` also rounded the rotary `inv_freq` buffer,
    # which a checkpoint does not carry (the engine computes it in f32, as transformers does).
    if fx.get("dtype") == "bf16":
        stored = {k: v.float() for k, v in model.state_dict().items()}
        model = LlamaForCausalLM(config).float().eval()
        model.load_state_dict(stored)

    prompts = random_prompts(random.Random(fx["seed"]), cfg["vocab_size"], fx["prompt_lengths"])
    write_decoder_golden(d, decoder_cases(torch, model, prompts), "gen_fixtures_llama.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
