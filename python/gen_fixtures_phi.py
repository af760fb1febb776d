#!/usr/bin/env python3
"""Regenerate the Phi / Phi-3 decoder fixtures under tests/decoder_fixtures/ and their goldens.

    python python/gen_fixtures_phi.py                 # all, into tests/decoder_fixtures/
    python python/gen_fixtures_phi.py --out /tmp/fx   # elsewhere

Fixed seeds, float32, eager attention: reruns are byte-identical. Fixtures:

- `phi_partial` (PhiForCausalLM, phi-2 layout): hidden 64, 4 heads (head_dim 16), 2 KV heads,
  2 layers, vocab 128, partial_rotary_factor 0.5 (8 rotated features per head) in
  transformers 5.x's `rope_parameters`, LayerNorm, parallel attention + MLP, biases, gelu_new,
  untied lm_head with bias.
- `phi3_longrope` (Phi3ForCausalLM): hidden 64, 4 heads, 2 KV heads, 3 layers, vocab 96,
  fused qkv_proj / gate_up_proj, RMSNorm, `longrope` with max_position_embeddings 64 and
  original_max_position_embeddings 24 (attention factor sqrt(1 + ln(64/24) / ln 24)),
  sliding_window 12 (shorter than the prompts).

Long factors: transformers picks short or long factors per forward call (long when the
call covers more than original_max_position_embeddings positions, then at every position),
and its Phi-3 generation recomputes the whole cache with the long factors once the sequence
grows past that length. kin-infer picks them per KV cache (long at every position when the
cache's capacity exceeds original_max_position_embeddings), which keeps incremental decoding
equal to the full pass and equals transformers for any single forward (cache sized to the
sequence) and for any generation that stays on one side of the boundary (prompt plus new
tokens within it, or a prompt already past it). So the phi3 `logits` cases include lengths
24 (short factors) and 30 (long factors), and the `generate` cases are 5 + 8 and 17 + 8
(within 24 positions fed) and 26 + 8 (past it from the start). Generation that starts
inside and ends past the boundary differs from transformers by design (the tokens chosen
while the sequence is still short use the long factors here).

Each golden.json (format kin-infer-golden/1, tol 1e-4) has `logits` cases (one row of vocab
logits per prompt position) and `generate` cases (greedy, max_new_tokens 8, no stop on EOS).
"""

from __future__ import annotations

import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, save_decoder, sizes, write_decoder_golden,
)
ORIG = 24

FIXTURES = {
    "phi_partial": dict(
        seed=3001,
        kind="phi",
        config=sizes(
            128, 64, 96, 2, 4, 2, 64, layer_norm_eps=1e-5, hidden_act="gelu_new", qk_layernorm=False,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        ),
        prompt_lengths=[1, 7, 19],
        generate_lengths=[1, 7, 19],
    ),
    "phi3_longrope": dict(
        seed=3002,
        kind="phi3",
        config=sizes(
            96, 64, 80, 3, 4, 2, 64, original_max_position_embeddings=ORIG, rms_norm_eps=1e-5, hidden_act="silu",
            tie_word_embeddings=False, sliding_window=12,
            rope_parameters={
                "rope_type": "longrope", "rope_theta": 10000.0,
                "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8],
                "long_factor": [1.2, 1.9, 2.8, 4.0, 5.5, 7.3, 9.4, 12.0],
                "original_max_position_embeddings": ORIG,
            },
        ),
        prompt_lengths=[3, 13, 24, 30],
        generate_lengths=[5, 17, 26],
    ),
}


def build(torch, name, fx, out_root):
    cfg = dict(fx["config"])
    if fx["kind"] == "phi":
        from transformers import PhiConfig as Config, PhiForCausalLM as Model
    else:
        from transformers import Phi3Config as Config, Phi3ForCausalLM as Model
    config = Config(**cfg, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    def init(pname, p, r):
        if "norm" in pname and pname.endswith("weight"):
            return 1.0 + 0.2 * r
        if pname.endswith("bias"):
            return 0.1 * r
        if "embed_tokens" in pname:
            return r
        return r / (p.shape[-1] ** 0.5)
    model = random_decoder(torch, Model, config, fx["seed"], init)
    d = save_decoder(model, out_root, name)
    rng = random.Random(fx["seed"])
    prompts = random_prompts(rng, cfg["vocab_size"], fx["prompt_lengths"])
    gen_prompts = random_prompts(rng, cfg["vocab_size"], fx["generate_lengths"])
    cases = decoder_cases(torch, model, prompts, gen_prompts)
    write_decoder_golden(d, cases, "gen_fixtures_phi.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
