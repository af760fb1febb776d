#!/usr/bin/env python3
"""Compare kin-infer's f32 GEMM with numpy (OpenBLAS) and torch in the same run.

Times a 1024x1024x1024 f32 matmul in numpy (and torch when importable) with 2 threads
(best of N), then runs `cargo run --release -p kin-infer --example matmul_bench` with the same
thread count and prints every line plus, per tier, the 1024^3 ratio to numpy. Baselines are
measured in the same run because this machine is shared and noisy: absolute GFLOP/s from
another day are not comparable.

Usage: scripts/bench_matmul.py [--threads 2] [--reps 10]
"""

import argparse
import os
import re
import subprocess
import sys
import time


def best_gflops(fn, n, reps):
    fn()  # warm-up (thread pool start, page faults)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    t = str(args.threads)
    # Must be set before numpy/torch load their BLAS.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = t

    import numpy as np

    n = 1024
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    baselines = {"numpy": best_gflops(lambda: a @ b, n, args.reps)}
    try:
        import torch

        torch.set_num_threads(args.threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        baselines["torch"] = best_gflops(lambda: ta @ tb, n, args.reps)
    except ImportError:
        pass
    for name, g in baselines.items():
        print(f"{name:8} 1024^3 {g:8.1f} GFLOP/s ({args.threads} threads)")

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, KIN_INFER_THREADS=t)
    cmd = ["cargo", "run", "--release", "-q", "-p", "kin-infer", "--example", "matmul_bench"]
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        sys.exit(out.returncode)
    print(out.stdout, end="")
    for line in out.stdout.splitlines():
        m = re.match(r"(\S+)\s+1024\^3\s+([\d.]+) GFLOP/s", line)
        if m:
            ratios = ", ".join(
                f"{100 * float(m.group(2)) / g:.0f}% of {name}" for name, g in baselines.items()
            )
            print(f"ratio {m.group(1)} 1024^3: {ratios}")
    # Numpy again after ours: a drift between the two numpy figures shows how noisy the run was.
    print(f"numpy    1024^3 {best_gflops(lambda: a @ b, n, args.reps):8.1f} GFLOP/s (after)")


if __name__ == "__main__":
    main()
