#!/usr/bin/env python3
"""Side-by-side speed of the inMotion families: PyTorch eager vs `inmotion-infer`, per window.

    python3 scripts/bench-inmotion.py [--formats fp32,int8,q4] [--runs 3] [--iterations 200]

1. Builds random-weight artifacts at the PUBLISHED sizes (seq_len 10, 4 channels, 4 classes;
   python/inmotion/models.py `PUBLISHED`) into target/bench/inmotion/{family}_{format}/ with
   `inmotion export-random --published` (needs torch; without torch, existing artifacts there are
   used, e.g. ones the Rust side built).
2. PyTorch eager column (skipped when torch is not importable): batch 1, torch.set_num_threads(1),
   model.eval() under torch.no_grad() (PyTorch's default inference path), `--warmup` calls then
   `--iterations` timed calls; the median, microseconds.
3. inmotion-infer column (skipped when target/release/inmotion-infer does not exist yet):
   `inmotion-infer bench --artifact DIR --iterations N --warmup W --json`, its `median_ms`.
Each cell is the best median of `--runs` runs (default 3), models interleaved (run 1 of every
model, then run 2, ...). Prints the grid and the speed-up (PyTorch / inmotion-infer).

Published sizes (the issue's table gives d_model, layers, ff, patch, filters, blocks; the rest is
chosen here): lejepa d128 4 heads 4 layers ff512 head 128; t_jepa n_reg 2 (42 tokens) d128 4 heads
4 layers ff256 head 128; ts_jepa d256 8 heads 4 layers ff512 patch 2 head 128; cf_jepa d256
8 heads 3 layers ff512 head 128; sigreg 192 filters 3 blocks latent 64.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
FAMILIES = ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"]
OUT = os.path.join(REPO, "target", "bench", "inmotion")
BIN = os.path.join(REPO, "target", "release", "inmotion-infer")


def have_torch():
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
        return True
    except ImportError:
        return False


def build(fam, fmt):
    from inmotion import cli
    d = os.path.join(OUT, f"{fam}_{fmt}")
    rc = cli.main(["export-random", "--family", fam, "--published", "--format", fmt, "--out", d, "--windows", "4"])
    if rc:
        raise SystemExit(f"export-random {fam} {fmt} failed")
    return d


def torch_median_us(art, iterations, warmup):
    import torch
    from inmotion import export
    torch.set_num_threads(1)
    m, meta = export.load_artifact(art)
    x = torch.randn(1, meta["seq_len"], meta["in_channels"])
    with torch.no_grad():
        for _ in range(warmup):
            m(x)
        ts = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            m(x)
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def rust_median_us(art, iterations, warmup):
    r = subprocess.run([BIN, "bench", "--artifact", art, "--iterations", str(iterations), "--warmup", str(warmup),
                        "--json"], capture_output=True, text=True)
    if r.returncode:
        print(f"inmotion-infer bench {art} failed ({r.returncode}): {r.stderr.strip()}", file=sys.stderr)
        return None
    return json.loads(r.stdout)["median_ms"] * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--formats", default="fp32")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--csv", help="also write the grid as CSV here")
    a = p.parse_args(argv)
    fams = a.families.split(",")
    fmts = a.formats.split(",")
    torch_ok = have_torch()
    rust_ok = os.path.isfile(BIN) and os.access(BIN, os.X_OK)
    if not torch_ok:
        print("torch not importable: PyTorch column skipped", file=sys.stderr)
    if not rust_ok:
        print(f"{BIN} not built (cargo build --release -p inmotion-cli): inmotion-infer column skipped",
              file=sys.stderr)
    cells = [(f, q) for f in fams for q in fmts]
    arts = {}
    for f, q in cells:
        d = os.path.join(OUT, f"{f}_{q}")
        if torch_ok:
            d = build(f, q)
        elif not os.path.isfile(os.path.join(d, "meta.json")):
            print(f"{d}: no artifact and no torch to build it; skipped", file=sys.stderr)
            continue
        arts[(f, q)] = d
    best = {c: {"torch": None, "rust": None} for c in arts}
    for r in range(a.runs):
        for c, d in arts.items():
            if torch_ok:
                v = torch_median_us(d, a.iterations, a.warmup)
                best[c]["torch"] = v if best[c]["torch"] is None else min(best[c]["torch"], v)
            if rust_ok:
                v = rust_median_us(d, a.iterations, a.warmup)
                if v is not None:
                    best[c]["rust"] = v if best[c]["rust"] is None else min(best[c]["rust"], v)
        print(f"run {r + 1}/{a.runs} done", file=sys.stderr)

    def fmt(v):
        return "-" if v is None else f"{v:.0f}"

    print(f"per window, batch 1, one thread, best median of {a.runs} interleaved runs, microseconds")
    print(f"| model | format | PyTorch eager | inmotion-infer | speed-up |")
    print("|---|---|---|---|---|")
    rows = []
    for (f, q), b in best.items():
        sp = b["torch"] / b["rust"] if b["torch"] and b["rust"] else None
        print(f"| {f} | {q} | {fmt(b['torch'])} | {fmt(b['rust'])} | {'-' if sp is None else f'{sp:.1f}x'} |")
        rows.append((f, q, b["torch"], b["rust"], sp))
    if a.csv:
        with open(a.csv, "w") as fh:
            fh.write("model,format,torch_us,inmotion_us,speedup\n")
            for r in rows:
                fh.write(",".join("" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)) for v in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
