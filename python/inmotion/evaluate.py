"""`inmotion eval`: MCC per model x precision with PyTorch on the dequantized weights, over the
test split. First re-checks each fp32 model's MCC against tests/fixtures/inmotion/baseline_mcc.json
and fails (exit 1) if it does not reproduce."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from . import data, export, models, quant, train
from . import models as models_mod

from .names import EVAL_FORMATS  # noqa: E402
MCC_TOL = 1e-9


def _mcc_of(model, split):
    return data.mcc(split.yte, train.predict(model, split.Xte))


SWEEP_COLUMNS = ["model", "format", "producer", "mcc", "accuracy", "size_bytes", "max_abs_diff"]


def _logits(model, X, bs=512):
    import torch
    model.eval()
    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(X[i:i + bs])).numpy() for i in range(0, len(X), bs)])


def check_dataset(split, base):
    """Refuses a dataset other than the one the baseline was computed on (by checksum)."""
    import hashlib
    if split.source == data.SPLIT_DIR:
        return  # the committed split of that dataset
    with open(split.source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    want = base.get("dataset_sha256")
    if want and digest != want:
        raise ValueError(f"{split.source}: sha256 {digest} is not the baseline's dataset ({want}); "
                         "the fp32 baselines do not apply to it")


def sweep(models=None, formats=None, producer="in-house", log=print):
    """`inmotion quantize eval`: one row per model x format (SWEEP_COLUMNS), after re-checking
    every fp32 model's MCC against the baseline on the baseline's dataset. Raises on a changed
    dataset or a baseline that does not reproduce."""
    import torch
    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)
    from . import registry
    from .fixtures import BASELINE
    names = models or list(models_mod.FAMILIES)
    formats = formats or EVAL_FORMATS
    split = data.load_split()
    with open(BASELINE) as f:
        base = json.load(f)
    check_dataset(split, base)
    rows = []
    # Progress on stderr (issue 35): each line says how far the sweep is and how long it has run.
    t0, total, k = time.monotonic(), len(names) * len(formats), 0

    def step():
        # Rate and ETA from the mean time per (model, format) so far.
        el = time.monotonic() - t0
        eta = el / k * (total - k) if k else 0.0
        return f"[{k}/{total}, {el:.1f} s, {k / el if el > 0 else 0.0:.2f}/s, ETA {eta:.0f} s]"

    for name in names:
        m, _ = export.load_artifact(registry.resolve(name))
        got = _mcc_of(m, split)
        want = base["mcc"].get(name)
        if want is not None and abs(got - want) > MCC_TOL:
            raise ValueError(f"{name}: fp32 MCC {got:.6f} does not reproduce the baseline {want}")
        log(f"{name}: fp32 MCC {got:.6f} " + ("(baseline reproduced)" if want is not None else "(no baseline)"))
        ref = _logits(m, split.Xte)
        for fmt in formats:
            k += 1
            sch = quant.parse_scheme(fmt)
            try:
                stored, deq, _ = export.quantize_state(m, sch, keep_num_batches_tracked=False, producer=producer)
            except ValueError as e:
                if "cannot make" not in str(e):
                    raise
                log(f"  {step()} {name} {sch.name}: skipped ({e})")
                continue
            q = export.model_with_weights(m, deq)
            lg = _logits(q, split.Xte)
            pred = lg.argmax(1)
            rows.append({
                "model": name, "format": sch.name, "producer": producer,
                "mcc": data.mcc(split.yte, pred), "accuracy": float((pred == split.yte).mean()),
                "size_bytes": int(sum(v.numel() * v.element_size() for v in stored.values())),
                "max_abs_diff": float(np.abs(lg - ref).max(initial=0.0)),
            })
            log(f"  {step()} {name} {sch.name}: MCC {rows[-1]['mcc']:.4f}")
    log(f"sweep: {len(rows)} rows ({len(names)} models x {len(formats)} formats, {producer}) "
        f"in {time.monotonic() - t0:.1f} s")
    return rows


def write_sweep(rows, path):
    import csv
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SWEEP_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})


def evaluate(models_dir=None, formats=None, baseline=None, doc=None, log=print):
    import torch
    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)
    from .fixtures import BASELINE, FIX
    models_dir = models_dir or FIX
    baseline = baseline or BASELINE
    formats = formats or EVAL_FORMATS
    split = data.load_split()
    with open(baseline) as f:
        base = json.load(f)
    rows, failed = {}, []
    for fam in models.FAMILIES:
        art = os.path.join(models_dir, f"{fam}_fp32")
        if not os.path.isdir(art):
            log(f"{fam}: no fp32 artifact at {art}")
            failed.append(fam)
            continue
        m, _ = export.load_artifact(art)
        got = _mcc_of(m, split)
        want = base["mcc"].get(fam)
        ok = want is not None and abs(got - want) <= MCC_TOL
        log(f"{fam}: fp32 MCC {got:.6f} (baseline {want}) {'reproduced' if ok else 'DOES NOT REPRODUCE'}")
        if not ok:
            failed.append(fam)
            continue
        rows[fam] = {}
        for fmt in formats:
            sch = quant.parse_scheme(fmt)
            _, deq, _ = export.quantize_state(m, sch)
            rows[fam][fmt] = _mcc_of(export.model_with_weights(m, deq), split)
    if failed:
        log(f"eval FAILED: fp32 baseline not reproduced for {', '.join(failed)}")
        return 1
    table = render(rows, formats, split, base)
    print(table)
    if doc:
        keep = ""
        if os.path.isfile(doc):  # the section `inmotion evaluate checkpoints --doc` writes
            with open(doc) as f:
                old = f.read()
            i = old.find("## Baselines, honestly")
            keep = "\n" + old[i:] if i >= 0 else ""
        with open(doc, "w") as f:
            f.write(table + keep)
        log(f"wrote {doc}")
    return 0


def render(rows, formats, split, base):
    lines = [
        "# inMotion: quantization accuracy (MCC), PyTorch reference",
        "",
        "Generated by `cd python && python3 -m inmotion eval --doc ../docs/inmotion-mcc.md`",
        "(also run by `python3 -m inmotion fixtures`). Do not edit by hand.",
        "",
        f"Matthews correlation coefficient on the {len(split.test_rows)} windows of the test split",
        "(`tests/fixtures/inmotion/data/test.csv`: stratified 80/20, seed 42; standardization fitted",
        "on the training split as recorded in each artifact's `preprocess`), computed by PyTorch on",
        "the dequantized weights (fp16/bf16: weights rounded to that type and widened to f32).",
        "Models: the small fixture models `tests/fixtures/inmotion/{family}_fp32` (configurations in",
        "`python/inmotion/models.py` `SMALL`). fp32 is the baseline recorded in",
        "`tests/fixtures/inmotion/baseline_mcc.json`, which `inmotion eval` re-checks first.",
        "",
        "Quantized formats: asymmetric min/max affine, `int8` per output channel, `int8_pt` per",
        f"tensor, `qN` per group of {quant.DEFAULT_GROUP} columns (`inmotion quantize formats`).",
        "",
        "| model | " + " | ".join(formats) + " |",
        "|---|" + "---|" * len(formats),
    ]
    for fam, r in rows.items():
        lines.append(f"| {fam} | " + " | ".join(f"{r[f]:.4f}" for f in formats) + " |")
    lines.append("")
    return "\n".join(lines)
