#!/usr/bin/env python3
"""Regenerate the LLaMA rope-scaling fixtures under tests/decoder_fixtures/ and their goldens.

    python python/gen_fixtures_llama_rope.py                 # all, into tests/decoder_fixtures/
    python python/gen_fixtures_llama_rope.py --out /tmp/fx   # elsewhere

Fixed seeds, float32, eager attention: reruns are byte-identical. Every fixture: hidden 64,
4 heads (head_dim 16), 2 KV heads, 2 layers, vocab 128, untied lm_head, rope_theta 10000.

- `llama_rope_linear`: `linear`, factor 2, max_position_embeddings 64. Its config.json is
  rewritten to the Hub spelling (top-level `rope_theta`, `rope_scaling: {"type": "linear",
  "factor": 2.0}`), which transformers reads the same way.
- `llama_rope_llama3`: `llama3`, factor 8, low/high freq factors 1/4,
  original_max_position_embeddings 64 (wavelength bands 16 and 64: of the 8 frequencies, 1 is
  kept, 2 are interpolated and 5 divided by the factor), max_position_embeddings 128;
  transformers 5.x spelling (`rope_parameters`).
- `llama_rope_dynamic`: `dynamic`, factor 2, max_position_embeddings 16 (our context: 32);
  prompts of 5, 16 and 23 tokens, so logits cases and greedy runs reach past 16.
  transformers' `dynamic_rope_update` keeps state on the rotary module (`max_seq_len_cached`,
  the current `inv_freq`) across calls; it is reset before every case, so each golden is what a
  freshly loaded model computes. Greedy decoding (KV cache) rotates each new token with the
  frequencies of the length at that step while the cached keys keep theirs.

Each golden.json (format kin-infer-golden/1, tol 1e-4) has `logits` cases (one row of vocab
logits per prompt position) and `generate` cases (greedy, max_new_tokens 8, no stop on EOS).
"""

from __future__ import annotations

import json
import os
import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, rms_decoder_init, save_decoder,
    write_decoder_golden,
)

BASE = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=False,
)

FIXTURES = {
    "llama_rope_linear": dict(
        seed=1101,
        max_position_embeddings=64,
        rope={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
        hub_spelling=True,
        prompt_lengths=[1, 9, 40],
    ),
    "llama_rope_llama3": dict(
        seed=1102,
        max_position_embeddings=128,
        rope={
            "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        hub_spelling=False,
        prompt_lengths=[3, 17, 90],
    ),
    "llama_rope_dynamic": dict(
        seed=1103,
        max_position_embeddings=16,
        rope={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
        hub_spelling=False,
        prompt_lengths=[5, 12, 16, 23],
    ),
}


def reset_rotary(model):
    """Back to a freshly loaded model's rotary state (matters for `dynamic` only)."""
    rot = model.model.rotary_emb
    rot.register_buffer("inv_freq", rot.original_inv_freq.clone(), persistent=False)
    rot.max_seq_len_cached = rot.original_max_seq_len


def build(torch, name, fx, out_root):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **BASE,
        max_position_embeddings=fx["max_position_embeddings"],
        rope_parameters=dict(fx["rope"]),
        bos_token_id=1, eos_token_id=2, pad_token_id=0,
        attention_bias=False, mlp_bias=False, hidden_act="silu",
    )
    model = random_decoder(torch, LlamaForCausalLM, config, fx["seed"], rms_decoder_init(False))
    d = save_decoder(model, out_root, name)
    if fx["hub_spelling"]:
        path = os.path.join(d, "config.json")
        with open(path) as f:
            c = json.load(f)
        rp = c.pop("rope_parameters")
        c["rope_theta"] = rp.pop("rope_theta")
        c["rope_scaling"] = {"type": rp.pop("rope_type"), **rp}
        with open(path, "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")

    prompts = random_prompts(random.Random(fx["seed"]), BASE["vocab_size"], fx["prompt_lengths"])
    cases = decoder_cases(torch, model, prompts, before_each=lambda: reset_rotary(model))
    write_decoder_golden(d, cases, "gen_fixtures_llama_rope.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
