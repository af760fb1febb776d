"""A Ray driver for test_ray.py, run as its own process so that the test can kill it (or one
of its workers) mid-run: embed_corpus(INPUT, MODEL, RUN_DIR) with 2 workers, then a JSON
report on stdout, on a line starting `REPORT `."""

import dataclasses
import json
import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402

from kin_infer.ray import embed_corpus  # noqa: E402

input_path, model, run_dir = sys.argv[1:4]
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
report = embed_corpus(input_path, model, run_dir, num_workers=2, batch_size=50,
                      embed_batch_size=10, show_progress=False)
# Ray's own processes may print to this stdout too (raylet notices): the report is marked.
print("REPORT " + json.dumps(dataclasses.asdict(report)), flush=True)
