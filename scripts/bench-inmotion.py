#!/usr/bin/env python3
"""Side-by-side speed of the inMotion families: PyTorch eager, ONNX Runtime and `inmotion-infer`,
per window.

    python3 scripts/bench-inmotion.py [--formats fp32,int8,q4] [--runs 3] [--iterations 200]

1. Builds random-weight artifacts at the PUBLISHED sizes (seq_len 10, 4 channels, 4 classes;
   python/inmotion/models.py `PUBLISHED`) into target/bench/inmotion/{family}_{format}/ with
   `inmotion export-random --published` (needs torch; without torch, existing artifacts there are
   used, e.g. ones the Rust side built).
2. PyTorch eager column (skipped when torch is not importable): batch 1, torch.set_num_threads(1),
   model.eval() under torch.no_grad() (PyTorch's default inference path), `--warmup` calls then
   `--iterations` timed calls; the median, microseconds.
3. ONNX Runtime column (skipped when onnxruntime or torch is not importable): the same torch
   module exported with `torch.onnx.export` (opset 17, batch 1) to target/bench/inmotion/*.onnx,
   run by `onnxruntime.InferenceSession` on the CPU provider with intra_op_num_threads = 1,
   inter_op_num_threads = 1, sequential execution, every graph optimization; timed like PyTorch
   (per `session.run` call from Python, so its ~few-microsecond call overhead is included).
4. inmotion-infer column (skipped when target/release/inmotion-infer does not exist yet):
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


def have_ort():
    try:
        import onnxruntime  # noqa: F401
        return True
    except ImportError:
        return False


def export_onnx(art):
    """The artifact's reference module as ONNX (batch 1), next to the artifact."""
    import torch
    from inmotion import export
    m, meta = export.load_artifact(art)
    m.eval()
    x = torch.randn(1, meta["seq_len"], meta["in_channels"])
    path = art.rstrip("/") + ".onnx"
    kw = dict(input_names=["x"], output_names=["logits"], opset_version=17)
    try:
        torch.onnx.export(m, (x,), path, dynamo=False, **kw)
    except TypeError:  # an exporter without the `dynamo` switch
        torch.onnx.export(m, (x,), path, **kw)
    return path, meta


def ort_median_us(art, iterations, warmup):
    import numpy as np
    import onnxruntime as ort
    path, meta = export_onnx(art)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, meta["seq_len"], meta["in_channels"])).astype(np.float32)
    feed = {"x": x}
    for _ in range(warmup):
        sess.run(None, feed)
    ts = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, feed)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def rust_median_us(art, iterations, warmup, binary=BIN):
    r = subprocess.run([binary, "bench", "--artifact", art, "--iterations", str(iterations), "--warmup", str(warmup),
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
    p.add_argument("--base-bin", help="a baseline inmotion-infer (e.g. the previous main's build), "
                                      "measured interleaved in the same run as its own column")
    a = p.parse_args(argv)
    fams = a.families.split(",")
    fmts = a.formats.split(",")
    torch_ok = have_torch()
    ort_ok = torch_ok and have_ort()
    rust_ok = os.path.isfile(BIN) and os.access(BIN, os.X_OK)
    if not torch_ok:
        print("torch not importable: PyTorch column skipped", file=sys.stderr)
    if not ort_ok:
        print("onnxruntime (or torch, to export) not importable: ONNX Runtime column skipped", file=sys.stderr)
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
    best = {c: {"torch": None, "ort": None, "rust": None, "base": None} for c in arts}

    def keep(c, col, v):
        if v is not None:
            best[c][col] = v if best[c][col] is None else min(best[c][col], v)

    for r in range(a.runs):
        for c, d in arts.items():
            if torch_ok:
                keep(c, "torch", torch_median_us(d, a.iterations, a.warmup))
            if ort_ok:
                keep(c, "ort", ort_median_us(d, a.iterations, a.warmup))
            if rust_ok:
                keep(c, "rust", rust_median_us(d, a.iterations, a.warmup))
            if a.base_bin:
                keep(c, "base", rust_median_us(d, a.iterations, a.warmup, a.base_bin))
        print(f"run {r + 1}/{a.runs} done", file=sys.stderr)

    def fmt(v):
        return "-" if v is None else f"{v:.0f}"

    print(f"per window, batch 1, one thread, best median of {a.runs} interleaved runs, microseconds")
    print("| model | format | PyTorch eager | ONNX Runtime | inmotion-infer (base) | inmotion-infer | vs PyTorch | vs ORT |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []

    def ratio(x, y):
        return x / y if x and y else None

    def rfmt(v):
        return "-" if v is None else f"{v:.2f}x"

    for (f, q), b in best.items():
        sp, so = ratio(b["torch"], b["rust"]), ratio(b["ort"], b["rust"])
        print(f"| {f} | {q} | {fmt(b['torch'])} | {fmt(b['ort'])} | {fmt(b['base'])} | {fmt(b['rust'])} "
              f"| {rfmt(sp)} | {rfmt(so)} |")
        rows.append((f, q, b["torch"], b["ort"], b["base"], b["rust"], sp, so))
    if a.csv:
        with open(a.csv, "w") as fh:
            fh.write("model,format,torch_us,ort_us,base_us,inmotion_us,speedup_torch,speedup_ort\n")
            for r in rows:
                fh.write(",".join("" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)) for v in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
