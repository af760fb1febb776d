#!/usr/bin/env python3
"""The Python package against its peers, in one run on one machine (issue 16, "How fast"):

1. `Embedder.encode` against `kin-infer embed` on the same corpus, model and threads: each in
   a fresh process, timed end to end (process start, model load, embedding; the CLI also
   writes its JSON Lines) and, for the package, the `encode` call alone. Target: within 5%.
2. sentence-transformers' `encode` on the same texts and threads (torch.set_num_threads),
   when an interpreter with it is given (`--st-python`; never installed by CI): the ratio.
3. `kin_infer.ray.embed_corpus` with 2 workers x 1 thread against one `kin-infer embed`
   process with 2 threads on the same JSON Lines corpus: Ray's overhead (local Ray, started
   before the timing; actor start and model loads included).

Runs alternate between the contenders (`--repeat` rounds) and the best of each is kept.
The corpus is python/gen_bench_corpus.py's (code snippets of 9..130 tokens), `--n` texts.

    python3 scripts/bench-python.py --python target/py-venv/bin/python \\
        [--st-python /path/to/venv-with-sentence-transformers/bin/python] \\
        [--threads 2] [--n 4000] [--repeat 3] [--json]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "kin-infer")

PY_ENCODE = r"""
import sys, time
t0 = time.perf_counter()
import kin_infer
model, corpus, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = open(corpus, encoding="utf-8").read().split("\n")[:-1]
e = kin_infer.Embedder(model, threads=threads)
t1 = time.perf_counter()
v = e.encode(texts, batch_size=32)
t2 = time.perf_counter()
assert v.shape[0] == len(texts)
print(t2 - t1)
"""

ST_ENCODE = r"""
import sys, time
import torch
from sentence_transformers import SentenceTransformer
model, corpus, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
texts = open(corpus, encoding="utf-8").read().split("\n")[:-1]
m = SentenceTransformer(model, device="cpu")
m.encode(texts[:64], batch_size=32)
t1 = time.perf_counter()
v = m.encode(texts, batch_size=32)
t2 = time.perf_counter()
assert v.shape[0] == len(texts)
print(t2 - t1, torch.__version__)
"""

RAY_RUN = r"""
import os, sys, time, json
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
import ray
from kin_infer.ray import embed_corpus
model, corpus, out = sys.argv[1], sys.argv[2], sys.argv[3]
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
t0 = time.perf_counter()
r = embed_corpus(corpus, model, out, num_workers=2, threads_per_worker=1, batch_size=256,
                 show_progress=False, merge_to=out + ".jsonl")
print("SECONDS", time.perf_counter() - t0, flush=True)
"""


def timed(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    return time.perf_counter() - t0, p.stdout


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=os.path.join(REPO, "target", "py-venv", "bin", "python"))
    ap.add_argument("--st-python")
    ap.add_argument("--model", default=os.environ.get("KIN_MINILM_DIR", os.path.join(REPO, "models", "all-MiniLM-L6-v2")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="bench-python-")
    corpus = os.path.join(tmp, "corpus.txt")
    subprocess.run([sys.executable, os.path.join(REPO, "python", "gen_bench_corpus.py"), corpus,
                    "--model", a.model, "--n", str(a.n)], check=True, capture_output=True)
    jsonl = os.path.join(tmp, "corpus.jsonl")
    with open(corpus, encoding="utf-8") as f, open(jsonl, "w", encoding="utf-8") as g:
        for i, t in enumerate(f.read().split("\n")[:-1]):
            g.write(json.dumps({"id": i, "text": t}) + "\n")
    n = a.n
    env = dict(os.environ, KIN_INFER_THREADS=str(a.threads))
    best = {}

    def keep(k, v):
        best[k] = min(best.get(k, float("inf")), v)

    st_version = None
    for r in range(a.repeat):
        t, _ = timed([BIN, "embed", "--model", a.model, "--input", corpus, "--threads",
                      str(a.threads), "--output", os.path.join(tmp, "cli.jsonl")], env=env)
        keep("cli_wall", t)
        t, out = timed([a.python, "-c", PY_ENCODE, a.model, corpus, str(a.threads)], env=env)
        keep("py_wall", t)
        keep("py_encode", float(out.strip()))
        if a.st_python:
            _, out = timed([a.st_python, "-c", ST_ENCODE, a.model, corpus, str(a.threads)], env=env)
            secs, st_version = out.split()
            keep("st_encode", float(secs))
        if not a.no_ray:
            t, _ = timed([BIN, "embed", "--model", a.model, "--jsonl", "--input", jsonl,
                          "--threads", "2", "--output", os.path.join(tmp, f"cli{r}.jsonl")], env=env)
            keep("cli2_jsonl_wall", t)
            _, out = timed([a.python, "-c", RAY_RUN, a.model, jsonl, os.path.join(tmp, f"ray{r}")], env=env)
            keep("ray_run", float([l for l in out.splitlines() if l.startswith("SECONDS ")][-1].split()[1]))
            same = open(os.path.join(tmp, f"cli{r}.jsonl"), "rb").read() == open(os.path.join(tmp, f"ray{r}.jsonl"), "rb").read()
            best["ray_identical"] = best.get("ray_identical", True) and same

    res = {
        "cpu": cpu_name(), "simd": os.environ.get("KIN_INFER_SIMD", "best"), "threads": a.threads,
        "texts": n,
        "cli_texts_per_s": n / best["cli_wall"],
        "python_texts_per_s": n / best["py_wall"],
        "python_encode_texts_per_s": n / best["py_encode"],
        "python_over_cli": best["cli_wall"] / best["py_wall"],
    }
    if "st_encode" in best:
        res["sentence_transformers_texts_per_s"] = n / best["st_encode"]
        res["torch"] = st_version
        res["python_encode_over_sentence_transformers"] = best["st_encode"] / best["py_encode"]
    if "ray_run" in best:
        res["cli_2threads_jsonl_s"] = best["cli2_jsonl_wall"]
        res["ray_2x1_s"] = best["ray_run"]
        res["ray_over_cli_time"] = best["ray_run"] / best["cli2_jsonl_wall"]
        res["ray_merged_identical"] = best["ray_identical"]
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:44} {v:.3f}" if isinstance(v, float) else f"{k:44} {v}")


if __name__ == "__main__":
    main()
