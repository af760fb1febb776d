#!/usr/bin/env python3
"""Regenerate the Gemma and Gemma 2 decoder fixtures under tests/decoder_fixtures/.

    python python/gen_fixtures_gemma.py                 # both, into tests/decoder_fixtures/
    python python/gen_fixtures_gemma.py --out /tmp/fx   # elsewhere

Same conventions as python/gen_fixtures_llama.py (fixed seeds, float32, eager attention,
byte-identical reruns, golden format kin-infer-golden/1, tol 1e-4). Fixtures:

- `gemma_tied`: hidden 64, 4 heads of an explicit `head_dim` 24 (heads * head_dim != hidden),
  2 KV heads (GQA), 2 layers, vocab 128, tied embeddings, GeGLU (gelu_pytorch_tanh).
- `gemma2_sw`: hidden 48, 4 heads of `head_dim` 16, 2 KV heads, 3 layers, vocab 96, tied,
  `sliding_window` 5 (shorter than the 7-, 19- and 27-token prompts) on layers 0 and 2
  (transformers' default `layer_types`), `query_pre_attn_scalar` 20 (not head_dim),
  `attn_logit_softcapping` 1.5 and `final_logit_softcapping` 0.5, both small enough to change
  the logits (checked here: the model without them differs by more than 1e-2).
- `gemma2_hd`: gemma2_sw's shape with `query_pre_attn_scalar` = head_dim 16, what a Gemma 2
  GGUF implies (python/gen_gguf_decoders.py converts it).

Gemma's RMSNorm multiplies by `(1 + w)`: norm weights are drawn as `0.2 * randn` so the
scale is near 1; the tied embedding table is `0.03 * randn` (and gemma_tied's projections
twice the usual `randn / sqrt(fan_in)`) so greedy decoding does not just repeat a token; every
greedy step's top-2 margin is checked to exceed 1e-3. Each golden.json has `logits` cases (one row of vocab logits per prompt
position) and `generate` cases (greedy, max_new_tokens 8, no stop on EOS).
"""

from __future__ import annotations

import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, save_decoder, sizes, write_decoder_golden,
)

FIXTURES = {
    "gemma_tied": dict(
        seed=3001,
        family="gemma",
        config=sizes(128, 64, 96, 2, 4, 2, 64, head_dim=24, rms_norm_eps=1e-6, rope_theta=10000.0,
                     hidden_act="gelu_pytorch_tanh"),
        prompt_lengths=[1, 7, 19],
        embed_scale=0.03, proj_scale=2.0,
    ),
    "gemma2_sw": dict(
        seed=3002,
        family="gemma2",
        config=sizes(
            96, 48, 80, 3, 4, 2, 48, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
            hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=20,
            sliding_window=5, attn_logit_softcapping=1.5, final_logit_softcapping=0.5,
        ),
        prompt_lengths=[7, 19, 27],
        embed_scale=0.03, proj_scale=1.0,
    ),
}
# What a Gemma 2 GGUF can say: llama.cpp has no key for query_pre_attn_scalar (it takes
# head_dim, hidden/heads for the 46-layer 27B), so this twin of gemma2_sw uses head_dim.
FIXTURES["gemma2_hd"] = dict(
    FIXTURES["gemma2_sw"], seed=3003, config=dict(FIXTURES["gemma2_sw"]["config"], query_pre_attn_scalar=16)
)


def make(torch, fx, cfg):
    if fx["family"] == "gemma":
        from transformers import GemmaConfig as C, GemmaForCausalLM as M
    else:
        from transformers import Gemma2Config as C, Gemma2ForCausalLM as M
    cfg = dict(cfg)
    theta = cfg.pop("rope_theta")
    config = C(
        **cfg,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        bos_token_id=2, eos_token_id=1, pad_token_id=0,
        attention_bias=False, tie_word_embeddings=True,
    )
    def init(pname, p, r):
        if "norm" in pname:
            return 0.2 * r  # (1 + w) near 1
        if "embed_tokens" in pname:
            # The tied table (also the head) is small: it is multiplied by sqrt(hidden) on
            # the way in, and a large one makes greedy repeat the input token.
            return fx["embed_scale"] * r
        return fx["proj_scale"] * r / (p.shape[-1] ** 0.5)
    model = random_decoder(torch, M, config, fx["seed"], init)
    return model


def build(torch, name, fx, out_root):
    model = make(torch, fx, fx["config"])
    config = model.config

    d = save_decoder(model, out_root, name)
    prompts = random_prompts(random.Random(fx["seed"]), config.vocab_size, fx["prompt_lengths"])
    # Greedy must not hinge on a near tie (our logits agree to ~1e-5).
    cases = decoder_cases(torch, model, prompts, min_gap=1e-3, label=name)
    if fx["family"] == "gemma2":
        # The softcaps must matter, else the fixture would not test them.
        with torch.no_grad():
            for off in ("attn_logit_softcapping", "final_logit_softcapping"):
                other = make(torch, fx, dict(fx["config"], **{off: None}))
                ids = prompts[-1]
                diff = (other(torch.tensor([ids])).logits - model(torch.tensor([ids])).logits)
                assert diff.abs().max().item() > 1e-2, (off, diff.abs().max().item())
    write_decoder_golden(d, cases, "gen_fixtures_gemma.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
