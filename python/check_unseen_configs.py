#!/usr/bin/env python3
"""Decoder checkpoints with configurations the committed fixtures do not cover (other head
counts, GQA ratios, head dims, rope types, windows), built on the fly by transformers with the
fixture generators' own `build()` functions, then checked with `kin-infer check`.

Issue 3's "Done when": "a checkpoint with a configuration the fixtures do not cover ... that
transformers can build also passes". Nothing here is committed: the models go to a temporary
directory, and the goldens are transformers' own outputs, as for the fixtures.

    cargo build --release -p kin-infer-cli
    python3 python/check_unseen_configs.py [--seed 7] [--keep DIR]

Needs torch + transformers (python/requirements.txt). Exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.path.join(REPO, "target", "release", "kin-infer")
sys.path.insert(0, HERE)


def shapes(rng):
    """Heads, KV heads, head dim and layers unlike any fixture's (seeded)."""
    heads = rng.choice([3, 5, 10, 12])
    kv = rng.choice([d for d in range(1, heads + 1) if heads % d == 0 and d not in (heads,)] or [1])
    head_dim = rng.choice([6, 10, 12])
    return heads, kv, head_dim, rng.choice([1, 3])


def cases(rng):
    """(generator module, fixture name, fixture dict) for each unseen configuration."""
    out = []
    heads, kv, hd, layers = shapes(rng)
    out.append(("gen_fixtures_llama", f"unseen_llama_h{heads}_kv{kv}", dict(
        seed=rng.randrange(1 << 30),
        config=dict(vocab_size=72, hidden_size=heads * hd, intermediate_size=40,
                    num_hidden_layers=layers, num_attention_heads=heads,
                    num_key_value_heads=kv, max_position_embeddings=48,
                    rms_norm_eps=1e-6, rope_theta=rng.choice([5000.0, 250000.0]),
                    tie_word_embeddings=rng.random() < 0.5),
        prompt_lengths=[rng.randrange(1, 6), rng.randrange(10, 30)],
    )))
    factor = rng.choice([2.0, 3.0])
    out.append(("gen_fixtures_llama_rope", f"unseen_rope_linear_{factor:g}", dict(
        seed=rng.randrange(1 << 30), max_position_embeddings=96,
        rope={"rope_type": "linear", "rope_theta": 10000.0, "factor": factor},
        hub_spelling=True, prompt_lengths=[4, 40],
    )))
    out.append(("gen_fixtures_llama_rope", "unseen_rope_dynamic", dict(
        seed=rng.randrange(1 << 30), max_position_embeddings=96,
        rope={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": rng.choice([1.5, 4.0]),
              "original_max_position_embeddings": 24},
        hub_spelling=False, prompt_lengths=[5, 60],
    )))
    heads, kv, hd, layers = shapes(rng)
    fam = rng.choice(["mistral", "qwen2"])
    out.append(("gen_fixtures_mistral_qwen2", f"unseen_{fam}_h{heads}_kv{kv}", dict(
        family=fam, seed=rng.randrange(1 << 30),
        config=dict(vocab_size=64, hidden_size=heads * hd, intermediate_size=48,
                    num_hidden_layers=layers, num_attention_heads=heads,
                    num_key_value_heads=kv, max_position_embeddings=48, rms_norm_eps=1e-6,
                    rope_theta=10000.0, tie_word_embeddings=False,
                    sliding_window=rng.choice([3, 6, 9])),
        prompt_lengths=[2, rng.randrange(15, 30)],
    )))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", help="write the models here instead of a temporary directory")
    a = ap.parse_args(argv)
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} missing: cargo build --release -p kin-infer-cli")
    import importlib

    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rng = random.Random(a.seed)
    root = a.keep or tempfile.mkdtemp(prefix="kin-unseen-")
    failed = 0
    for module, name, fx in cases(rng):
        gen = importlib.import_module(module)
        if module == "gen_fixtures_mistral_qwen2":
            fx["config"].setdefault("use_sliding_window", True)
        gen.build(torch, name, fx, root)
        d = os.path.join(root, name)
        r = subprocess.run([BIN, "check", "--model", d, "--golden", os.path.join(d, "golden.json")],
                           capture_output=True, text=True)
        tail = " | ".join(r.stdout.strip().splitlines()[-3:])
        print(f"{name:32} exit {r.returncode}: {tail}")
        if r.returncode != 0:
            failed += 1
            print(r.stderr[-2000:], file=sys.stderr)
    print(f"{failed} failed" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
