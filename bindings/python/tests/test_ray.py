"""kin_infer.ray on a local Ray (2 CPUs, usage statistics off, nothing leaving the machine):
a 2,000-item corpus over 2 workers, a worker killed mid-run, the driver killed mid-run and the
run resumed, merged: byte-identical to `kin-infer embed` of the same input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
ray = pytest.importorskip("ray") if os.environ.get("KIN_REQUIRE_RAY") != "1" else __import__("ray")

import kin_infer  # noqa: E402
from kin_infer import ray as kray  # noqa: E402

HERE = Path(__file__).resolve().parent
ITEMS = 2000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, minilm, kin_infer_bin):
    d = tmp_path_factory.mktemp("corpus")
    inp = d / "corpus.jsonl"
    with open(inp, "w", encoding="utf-8") as f:
        for i in range(ITEMS):
            body = f"fn entity_{i}(x: u64) -> u64 {{ x.wrapping_mul({i % 97}) ^ {i} }}"
            rec = {"id": f"crate::m{i % 13}::entity_{i}", "text": body}
            if i % 250 == 0:
                rec["id"] = i  # ids of other JSON types are kept as written
            f.write(json.dumps(rec) + "\n")
    ref = d / "cli.jsonl"
    subprocess.run([str(kin_infer_bin), "embed", "--model", str(minilm), "--jsonl", "--input",
                    str(inp), "--output", str(ref)], check=True, capture_output=True)
    return inp, ref.read_bytes()


def complete_shards(run: Path) -> int:
    n = 0
    for m in (run / "shards").glob("*.manifest.json"):
        try:
            if json.loads(m.read_text())["progress"]["complete"]:
                n += 1
        except (OSError, ValueError):
            pass  # being replaced right now
    return n


def wait_for(pred, timeout=120.0):
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.02)


def driver(inp, minilm, run):
    return subprocess.Popen([sys.executable, str(HERE / "ray_driver.py"), str(inp), str(minilm),
                             str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_worker_killed_mid_run_and_the_merge_is_byte_identical(corpus, minilm, tmp_path):
    inp, reference = corpus
    run = tmp_path / "run"
    p = driver(inp, minilm, run)
    wait_for(lambda: complete_shards(run) >= 3 or p.poll() is not None)
    assert p.poll() is None, p.communicate()
    done_at_kill = complete_shards(run)
    victim = sorted((run / "workers").iterdir())[0].name
    os.kill(int(victim), signal.SIGKILL)
    out, err = p.communicate(timeout=300)
    if p.returncode != 0:
        # Ray gave up on the shard: the run is resumed by running it again.
        p = driver(inp, minilm, run)
        out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    reports = [l[len("REPORT "):] for l in out.splitlines() if l.startswith("REPORT ")]
    assert reports, out[-3000:]
    report = json.loads(reports[-1])
    assert report["items"] == ITEMS and report["shards"] == 40
    assert done_at_kill < 40, "the worker was killed after the run had finished"
    # Ray restarted the killed actor (a new worker process) or the rerun started new ones.
    assert len(list((run / "workers").iterdir())) >= 3
    merged = tmp_path / "merged.jsonl"
    kray.merge(run, str(merged))
    assert merged.read_bytes() == reference


def test_the_driver_killed_mid_run_resumes_and_merges_to_jsonl_and_parquet(corpus, minilm, tmp_path):
    inp, reference = corpus
    run = tmp_path / "run"
    p = driver(inp, minilm, run)
    wait_for(lambda: complete_shards(run) >= 3 or p.poll() is not None)
    assert p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    st = kray.status(run)
    assert 0 < len(st["pending"]) < 40
    with pytest.raises(kin_infer.InvalidInputError, match="not finished"):
        kray.merge(run, str(tmp_path / "early.jsonl"))
    # Resumed in this process, on its own local Ray.
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    report = kray.embed_corpus(str(inp), str(minilm), run, num_workers=2, batch_size=50,
                               show_progress=False, merge_to=str(tmp_path / "merged.jsonl"))
    # Workers orphaned by the killed driver may finish a shard or two before they notice.
    assert 0 < report.shards_run <= len(st["pending"]) < 40
    assert report.items_resumed + report.items_embedded == 50 * report.shards_run
    assert (tmp_path / "merged.jsonl").read_bytes() == reference
    # Parquet: the same vectors, bit for bit, with index and id columns.
    pq = pytest.importorskip("pyarrow.parquet")
    kray.merge(run, str(tmp_path / "merged.parquet"))
    t = pq.read_table(tmp_path / "merged.parquet")
    assert t.num_rows == ITEMS and t.column_names == ["index", "id", "embedding"]
    want = [json.loads(l) for l in reference.splitlines()]
    assert t.column("index").to_pylist() == list(range(ITEMS))
    got = np.stack(t.column("embedding").to_numpy(zero_copy_only=False)).astype(np.float32)
    exp = np.array([r["embedding"] for r in want], dtype=np.float64).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))
    assert t.column("id").to_pylist()[:3] == [json.dumps(r["id"]) for r in want[:3]]


def test_a_resume_with_other_settings_is_refused_and_datasets_are_inputs(corpus, minilm, tmp_path,
                                                                         kin_infer_bin):
    inp, _ = corpus
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = [{"id": f"r{i}", "text": f"row number {i} of a Ray Dataset"} for i in range(120)]
    ds = ray.data.from_items(rows)
    run = tmp_path / "run"
    r = kray.embed_corpus(ds, str(minilm), run, num_workers=2, batch_size=32,
                          show_progress=False, merge_to=str(tmp_path / "ds.jsonl"))
    assert (r.items, r.shards) == (120, 4)
    cli = subprocess.run([str(kin_infer_bin), "embed", "--model", str(minilm), "--jsonl",
                          "--input", str(run / "input.jsonl")], check=True, capture_output=True)
    assert (tmp_path / "ds.jsonl").read_bytes() == cli.stdout
    with pytest.raises(kin_infer.InvalidInputError, match="other settings"):
        kray.embed_corpus(ds, str(minilm), run, normalize=False, show_progress=False)
    with pytest.raises(kin_infer.InvalidInputError, match="batch_size"):
        kray.embed_corpus(str(inp), str(minilm), tmp_path / "x", batch_size=0)
