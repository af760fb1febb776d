#!/usr/bin/env python3
"""Regenerate the GPT-2 decoder fixtures under tests/decoder_fixtures/ and their goldens.

    python python/gen_fixtures_gpt2.py                 # both, into tests/decoder_fixtures/
    python python/gen_fixtures_gpt2.py --out /tmp/fx   # elsewhere

Fixed seeds, float32, eager attention: reruns are byte-identical. Fixtures:

- `gpt2_small`: n_embd 48, 4 heads, 2 layers, vocab 100, n_positions 64, n_inner unset
  (4 * n_embd), layer_norm_epsilon 1e-5; tensors saved by `save_pretrained`
  (`transformer.` prefix, tied head absent).
- `gpt2_bare`: n_embd 64, 8 heads (head_dim 8), 3 layers, vocab 120, n_positions 40,
  n_inner 96, layer_norm_epsilon 1e-6, `scale_attn_by_inverse_layer_idx`; tensors rewritten
  without the `transformer.` prefix (the layout of the Hub's original `gpt2` checkpoint).

Each golden.json (format kin-infer-golden/1, tol 1e-4) has `logits` cases (one row of vocab
logits per prompt position) and `generate` cases (greedy, max_new_tokens 8, no stop on EOS).
"""

from __future__ import annotations

import os
import random

import decoder_fixture
from decoder_fixture import (
    decoder_cases, random_decoder, random_prompts, save_decoder, write_decoder_golden,
)

FIXTURES = {
    "gpt2_small": dict(
        seed=2001,
        config=dict(
            vocab_size=100, n_positions=64, n_embd=48, n_layer=2, n_head=4, n_inner=None,
            layer_norm_epsilon=1e-5,
        ),
        strip_prefix=False,
        prompt_lengths=[1, 7, 19],
    ),
    "gpt2_bare": dict(
        seed=2002,
        config=dict(
            vocab_size=120, n_positions=40, n_embd=64, n_layer=3, n_head=8, n_inner=96,
            layer_norm_epsilon=1e-6, scale_attn_by_inverse_layer_idx=True,
        ),
        strip_prefix=True,
        prompt_lengths=[2, 11, 30],
    ),
}


def build(torch, name, fx, out_root):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        **fx["config"], activation_function="gelu_new", bos_token_id=1, eos_token_id=2,
        pad_token_id=0, tie_word_embeddings=True,
    )
    def init(pname, p, r):
        if ".ln_" in pname and pname.endswith(".weight"):
            return 1.0 + 0.2 * r
        if pname.endswith(".bias"):
            return 0.1 * r
        if pname.endswith("wte.weight") or pname.endswith("wpe.weight"):
            # wte is also the head: a small scale keeps the residual stream from being
            # dominated by the input token (greedy would just repeat it).
            return 0.2 * r
        # Conv1D weights are [in, out].
        return r / (p.shape[0] ** 0.5)
    model = random_decoder(torch, GPT2LMHeadModel, config, fx["seed"], init)
    d = save_decoder(model, out_root, name)
    if fx["strip_prefix"]:
        from safetensors.torch import load_file, save_file

        path = os.path.join(d, "model.safetensors")
        tensors = load_file(path)
        renamed = {k.removeprefix("transformer."): v.contiguous() for k, v in tensors.items()}
        assert "wte.weight" in renamed and "lm_head.weight" not in renamed, sorted(renamed)
        save_file(dict(sorted(renamed.items())), path, metadata={"format": "pt"})

    prompts = random_prompts(random.Random(fx["seed"]), fx["config"]["vocab_size"],
                             fx["prompt_lengths"])
    cases = decoder_cases(torch, model, prompts)
    write_decoder_golden(d, cases, "gen_fixtures_gpt2.py", name)


def main(argv=None):
    decoder_fixture.main(FIXTURES, build, argv)


if __name__ == "__main__":
    main()
