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
ORIG = 24

FIXTURES = {
    "phi_partial": dict(
        seed=3001,
        kind="phi",
        config=dict(
            vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            layer_norm_eps=1e-5, hidden_act="gelu_new", qk_layernorm=False,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "partial_rotary_factor": 0.5},
        ),
        prompt_lengths=[1, 7, 19],
        generate_lengths=[1, 7, 19],
    ),
    "phi3_longrope": dict(
        seed=3002,
        kind="phi3",
        config=dict(
            vocab_size=96, hidden_size=64, intermediate_size=80, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            original_max_position_embeddings=ORIG, rms_norm_eps=1e-5, hidden_act="silu",
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
    config._attn_implementation = "eager"
    torch.manual_seed(fx["seed"])
    model = Model(config).float().eval()
    g = torch.Generator().manual_seed(fx["seed"])
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in pname and pname.endswith("weight"):
                p.copy_(1.0 + 0.2 * r)
            elif pname.endswith("bias"):
                p.copy_(0.1 * r)
            elif "embed_tokens" in pname:
                p.copy_(r)
            else:
                p.copy_(r / (p.shape[-1] ** 0.5))

    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model.save_pretrained(d, safe_serialization=True)
    drop_generation_config(d)

    rng = random.Random(fx["seed"])
    vocab = cfg["vocab_size"]
    cases = []
    rand = lambda n: [rng.randrange(3, vocab) for _ in range(n)]  # noqa: E731
    prompts = [rand(n) for n in fx["prompt_lengths"]]
    gen_prompts = [rand(n) for n in fx["generate_lengths"]]
    with torch.no_grad():
        cases += [logits_case(torch, model, ids) for ids in prompts]
        cases += [generate_case(torch, model, ids) for ids in gen_prompts]
    write_decoder_golden(d, TOL, cases, "gen_fixtures_phi.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
