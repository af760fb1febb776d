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
    config._attn_implementation = "eager"
    torch.manual_seed(fx["seed"])
    model = GPT2LMHeadModel(config).float().eval()
    g = torch.Generator().manual_seed(fx["seed"])
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if ".ln_" in pname and pname.endswith(".weight"):
                p.copy_(1.0 + 0.2 * r)
            elif pname.endswith(".bias"):
                p.copy_(0.1 * r)
            elif pname.endswith("wte.weight") or pname.endswith("wpe.weight"):
                # wte is also the head: a small scale keeps the residual stream from being
                # dominated by the input token (greedy would just repeat it).
                p.copy_(0.2 * r)
            else:
                # Conv1D weights are [in, out].
                p.copy_(r / (p.shape[0] ** 0.5))
        model.tie_weights()

    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model.save_pretrained(d, safe_serialization=True)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    if fx["strip_prefix"]:
        from safetensors.torch import load_file, save_file

        path = os.path.join(d, "model.safetensors")
        tensors = load_file(path)
        renamed = {k.removeprefix("transformer."): v.contiguous() for k, v in tensors.items()}
        assert "wte.weight" in renamed and "lm_head.weight" not in renamed, sorted(renamed)
        save_file(dict(sorted(renamed.items())), path, metadata={"format": "pt"})

    rng = random.Random(fx["seed"])
    vocab = fx["config"]["vocab_size"]
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
                 extra=dict(generator="python/gen_fixtures_gpt2.py", fixture=name,
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
