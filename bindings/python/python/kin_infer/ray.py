"""Corpus embedding spread over a Ray cluster, with the same bytes as one process.

    from kin_infer.ray import embed_corpus
    report = embed_corpus("corpus.jsonl", "models/all-MiniLM-L6-v2", "run/",
                          num_workers=8, batch_size=512, merge_to="embeddings.jsonl")

The input (a file in ``kin-infer embed``'s format, or a Ray Dataset with a ``text`` and an
optional ``id`` column) is indexed into shards of ``batch_size`` items. Ray Data runs an actor
pool of ``num_workers`` embedders over the shards (``map_batches``); each worker writes its
shard as a durable output in the format of ``kin-infer embed --resume`` (fsync'd commits, a
manifest with the model hash and numerics version). Run the same call again after a worker,
the driver or the whole cluster died: finished shards are kept, half-written ones continue
where their durable part ends. :func:`merge` then writes one JSON Lines file byte-identical to
``kin-infer embed --jsonl --input corpus.jsonl`` (embeddings do not depend on batch, thread
count or machine), or a Parquet file.

On a cluster, ``output_dir`` and the input must be on storage every node sees (NFS, a shared
volume), and the package installed on every node; call ``ray.init(address=...)`` before
:func:`embed_corpus` (otherwise it starts a local Ray).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import Embedder, _native
from .errors import InvalidInputError

__all__ = ["embed_corpus", "merge", "status", "RunReport"]


@dataclass
class RunReport:
    output_dir: str
    items: int
    shards: int
    #: Shards embedded by this call (the rest were finished before it).
    shards_run: int
    #: Items found already durable in shards this call continued.
    items_resumed: int
    items_embedded: int
    seconds: float
    merged: Optional[str] = None


def _ray():
    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "kin_infer.ray needs Ray Data: pip install 'kin-infer[ray]' (or 'ray[data]')"
        ) from e
    return ray


class _ShardWorker:
    """One actor of the pool: an Embedder, loaded once, writing whole shards."""

    def __init__(self, model: str, options: Dict[str, Any], run_dir: str, embed_batch_size: int):
        self.embedder = Embedder(model, **options)
        self.run_dir = run_dir
        self.embed_batch_size = embed_batch_size
        # Who is working, for operators (and the kill test): one empty file per worker pid.
        workers = os.path.join(run_dir, "workers")
        os.makedirs(workers, exist_ok=True)
        open(os.path.join(workers, str(os.getpid())), "w").close()

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        shards = [int(k) for k in batch["shard"]]
        resumed, embedded = [], []
        for k in shards:
            r, n = self.embedder._native.write_shard(self.run_dir, k, self.embed_batch_size)
            resumed.append(r)
            embedded.append(n)
        return {
            "shard": np.array(shards, dtype=np.int64),
            "resumed": np.array(resumed, dtype=np.int64),
            "embedded": np.array(embedded, dtype=np.int64),
        }


def _write_dataset(ds: Any, path: str) -> None:
    """Writes a Ray Dataset's ``text`` (and ``id``) rows, in the dataset's order, as the
    JSON Lines input of the run (so that shards, resumes and merge see one fixed input)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i, row in enumerate(ds.iter_rows()):
            text = row.get("text")
            if not isinstance(text, str):
                raise InvalidInputError(f"dataset row {i} has no string `text` column")
            rec: Dict[str, Any] = {}
            if "id" in row and row["id"] is not None:
                v = row["id"]
                rec["id"] = v.item() if isinstance(v, np.generic) else v
            rec["text"] = text
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def embed_corpus(
    dataset_or_path: Union[str, "os.PathLike[str]", Any],
    model: str,
    output_dir: Union[str, "os.PathLike[str]"],
    *,
    num_workers: int = 2,
    batch_size: int = 256,
    threads_per_worker: int = 1,
    embed_batch_size: int = 32,
    jsonl: Optional[bool] = None,
    max_length: Optional[int] = None,
    normalize: Optional[bool] = None,
    pooling: Optional[str] = None,
    dimensions: Optional[int] = None,
    merge_to: Optional[str] = None,
    show_progress: bool = True,
) -> RunReport:
    """Embeds a corpus on Ray, durably and resumably, into shards under ``output_dir``.

    Args:
        dataset_or_path: an input file (one text per line, or JSON Lines objects with a
            string ``text`` and an optional unique ``id``), or a Ray Dataset with those
            columns (written to ``output_dir/input.jsonl`` first, in the dataset's order).
        model: model directory, ``.gguf`` file or cached repo id (as :class:`Embedder`).
        output_dir: the run directory (``run.json``, ``shards/``); reuse it to resume.
        num_workers: actors in the pool (each loads the model once).
        batch_size: items per shard (the unit of work and of retry).
        threads_per_worker: engine threads (and Ray CPUs) per actor.
        embed_batch_size: texts per forward pass inside a worker (speed only).
        jsonl: whether the input file is JSON Lines (default: its name ends in ``.jsonl``).
        max_length, normalize, pooling, dimensions: as :class:`Embedder`; part of the run's
            identity (a resume with other settings is refused).
        merge_to: when given, :func:`merge` into this file once every shard is done.
        show_progress: a line on stderr per finished shard.
    """
    ray = _ray()
    t0 = time.monotonic()
    if batch_size < 1 or num_workers < 1 or threads_per_worker < 1 or embed_batch_size < 1:
        raise InvalidInputError(
            "batch_size, num_workers, threads_per_worker and embed_batch_size must be at least 1"
        )
    out_dir = os.path.abspath(os.fspath(output_dir))
    os.makedirs(out_dir, exist_ok=True)
    if isinstance(dataset_or_path, (str, os.PathLike)):
        input_path = os.path.abspath(os.fspath(dataset_or_path))
        is_jsonl = input_path.endswith(".jsonl") if jsonl is None else jsonl
    else:
        input_path = os.path.join(out_dir, "input.jsonl")
        _write_dataset(dataset_or_path, input_path)
        is_jsonl = True
    model_path = os.path.abspath(model) if os.path.exists(model) else model
    options = dict(threads=threads_per_worker, max_length=max_length, normalize=normalize,
                   pooling=pooling, dimensions=dimensions)
    # The driver loads the model once for the run's identity (model hash, settings): a run
    # directory made with another model or settings is refused before any work.
    driver = Embedder(model_path, **options)
    identity = driver._native.identity("jsonl" if is_jsonl else "lines")
    del driver
    run = json.loads(_native.prepare_run(out_dir, input_path, is_jsonl, batch_size, identity))
    n_shards = len(run["index"]["shards"])
    pending: List[int] = _native.pending_shards(out_dir)
    resumed = embedded = 0
    if pending:
        if not ray.is_initialized():
            ray.init(num_cpus=max(os.cpu_count() or 1, num_workers * threads_per_worker),
                     include_dashboard=False, log_to_driver=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_items([{"shard": k} for k in pending])
        done_ds = ds.map_batches(
            _ShardWorker,
            fn_constructor_kwargs=dict(model=model_path, options=options, run_dir=out_dir,
                                       embed_batch_size=embed_batch_size),
            batch_size=1,
            concurrency=num_workers,
            num_cpus=threads_per_worker,
            # Ray Data restarts a dead actor and retries its shard without limit by default
            # (max_restarts=-1, max_task_retries=-1); the retry continues the shard's durable
            # part. An exception from the engine (bad input, another model) is not retried.
        )
        finished = n_shards - len(pending)
        for row in done_ds.iter_rows():
            finished += 1
            resumed += int(row["resumed"])
            embedded += int(row["embedded"])
            if show_progress:
                sys.stderr.write(
                    f"kin_infer.ray: shard {int(row['shard'])} done ({finished}/{n_shards})\n"
                )
    left = _native.pending_shards(out_dir)
    if left:
        raise RuntimeError(
            f"{len(left)} shards are still unfinished in {out_dir}; run embed_corpus again"
        )
    report = RunReport(out_dir, run["index"]["items"], n_shards, len(pending), resumed, embedded,
                       time.monotonic() - t0)
    if merge_to is not None:
        report.merged = merge(out_dir, merge_to)
    return report


def status(output_dir: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Items, shards and unfinished shards of the run in ``output_dir``."""
    d = os.path.abspath(os.fspath(output_dir))
    with open(os.path.join(d, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    pending = _native.pending_shards(d)
    return {"items": run["index"]["items"], "shards": len(run["index"]["shards"]),
            "pending": pending, "identity": run["identity"]}


def merge(output_dir: Union[str, "os.PathLike[str]"], out: str,
          *, format: Optional[str] = None) -> str:
    """Merges a finished run into ``out``: JSON Lines (byte-identical to ``kin-infer embed``
    of the same input), or Parquet (``format="parquet"`` or a ``.parquet`` name; columns
    ``index`` uint64, ``id``, ``embedding`` fixed-size list of float32; needs pyarrow),
    written shard by shard so memory stays bounded. Returns ``out``."""
    d = os.path.abspath(os.fspath(output_dir))
    fmt = format or ("parquet" if str(out).endswith(".parquet") else "jsonl")
    if fmt == "jsonl":
        _native.merge(d, os.fspath(out))
        return os.fspath(out)
    if fmt != "parquet":
        raise InvalidInputError(f"format `{fmt}` (expected jsonl or parquet)")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("Parquet output needs pyarrow: pip install 'kin-infer[parquet]'") from e
    st = status(d)
    if st["pending"]:
        # The same check and message as the JSON Lines merge.
        _native.merge(d, os.fspath(out) + ".check")
    writer = None
    tmp = os.fspath(out) + f".partial-{os.getpid()}"
    try:
        for k in range(st["shards"]):
            idx, ids, emb, width = _native.read_shard(d, k)
            values = [json.loads(s) for s in ids]
            try:
                id_col = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                id_col = pa.array(ids)  # mixed types: the ids' JSON text
            flat = pa.array(np.frombuffer(emb, dtype=np.float32))
            table = pa.table({
                "index": pa.array(idx, type=pa.uint64()),
                "id": id_col,
                "embedding": pa.FixedSizeListArray.from_arrays(flat, width),
            })
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            elif table.schema != writer.schema:
                table = table.cast(writer.schema)
            writer.write_table(table)
        if writer is not None:
            writer.close()
            writer = None
        os.replace(tmp, os.fspath(out))
    finally:
        if writer is not None:
            writer.close()
        if os.path.exists(tmp):
            os.remove(tmp)
    return os.fspath(out)
