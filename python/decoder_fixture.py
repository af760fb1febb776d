"""What every decoder fixture generator (python/gen_fixtures_{llama,llama_rope,mistral_qwen2,
gpt2,phi,gemma}.py) does the same way: drop generation_config.json, build `logits` and greedy
`generate` cases with transformers, write the golden, and the command line."""

from __future__ import annotations

import argparse
import os

from golden_json import f32_list, package_versions, write_golden

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NEW_TOKENS = 8


def drop_generation_config(d):
    """generation_config.json carries a transformers version and sampling defaults that are not
    part of the fixtures."""
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)


def logits_case(torch, model, ids):
    """One row of vocab logits per prompt position (call under torch.no_grad())."""
    logits = model(torch.tensor([ids])).logits[0]
    return dict(name=f"logits_{len(ids)}", kind="logits", input_ids=[ids],
                expected=[f32_list(logits)])


def generate_case(torch, model, ids, min_gap=None, label=None):
    """Greedy NEW_TOKENS tokens, no stop on EOS (call under torch.no_grad()). With `min_gap`,
    every step's top two logits must differ by more than it (greedy must not hinge on a tie)."""
    out = model.generate(
        torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
        eos_token_id=None, pad_token_id=0, use_cache=True, output_scores=min_gap is not None,
        return_dict_in_generate=True,
    )
    new = out.sequences[0, len(ids):].tolist()
    assert len(new) == NEW_TOKENS, new
    if min_gap is not None:
        for step in out.scores:
            top = step[0].topk(2).values
            assert (top[0] - top[1]).item() > min_gap, (label, ids, new)
    return dict(name=f"generate_{len(ids)}", kind="generate", input_ids=[ids],
                max_new_tokens=NEW_TOKENS, expected_tokens=[new])


def write_decoder_golden(d, tol, cases, script, name):
    write_golden(os.path.join(d, "golden.json"), tol, cases,
                 extra=dict(generator=f"python/{script}", fixture=name,
                            versions=package_versions()))
    print(f"wrote {d}")


def main(fixtures, build, argv=None):
    """`--out DIR` (default tests/decoder_fixtures), `--only NAME...`; deterministic torch on
    one thread, then `build(torch, name, fx, out)` per fixture."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "decoder_fixtures"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, fx in fixtures.items():
        if a.only and name not in a.only:
            continue
        build(torch, name, fx, a.out)
