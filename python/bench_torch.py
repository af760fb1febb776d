#!/usr/bin/env python3
"""Baseline throughput of sentence-transformers on CPU, for comparison with kin-infer.

    python python/gen_bench_corpus.py /tmp/corpus.txt
    python python/bench_torch.py --model models/all-MiniLM-L6-v2 --input /tmp/corpus.txt \
        --batch-size 32 --repeat 3 [--threads 2]

Encodes every line of INPUT in file order, B lines per `encode` call (so batches hold the same
texts, and pad the same way, as an engine batching in file order; pass --st-sort to give the
whole file to one `encode` call, which lets sentence-transformers sort by length first),
float32, the model's own pooling/normalization, REPEAT times after one warm-up pass, with torch.set_num_threads(THREADS),
and prints one JSON line: texts/s of the best and the median repeat, plus the setup.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True, help="one text per line")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--st-sort", action="store_true",
                    help="one encode() call over the whole file (sentence-transformers sorts by length)")
    args = ap.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    with open(args.input, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    if not texts:
        sys.exit(f"{args.input} is empty")

    model = SentenceTransformer(args.model, device="cpu")
    model.eval()

    def run():
        b = args.batch_size
        chunks = [texts] if args.st_sort else [texts[i:i + b] for i in range(0, len(texts), b)]
        t0 = time.perf_counter()
        n = 0
        with torch.inference_mode():
            for chunk in chunks:
                emb = model.encode(chunk, batch_size=b, convert_to_numpy=True, show_progress_bar=False)
                n += emb.shape[0]
        dt = time.perf_counter() - t0
        assert n == len(texts)
        return dt

    warmup_s = run()
    times = [run() for _ in range(max(args.repeat, 1))]
    rates = [len(texts) / t for t in times]
    result = {
        "engine": "sentence-transformers (torch)",
        "model": os.path.basename(os.path.normpath(args.model)),
        "texts": len(texts),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "order": "st-sorted" if args.st_sort else "file",
        "repeat": len(times),
        "texts_per_s_best": round(max(rates), 2),
        "texts_per_s_median": round(statistics.median(rates), 2),
        "seconds": [round(t, 4) for t in times],
        "warmup_s": round(warmup_s, 4),
        "torch": torch.__version__,
        "sentence_transformers": __import__("sentence_transformers").__version__,
        "cpu": platform.processor() or platform.machine(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
