"""Command line: `inmotion` (console script) or `python3 -m inmotion` from python/."""

from __future__ import annotations

import argparse
import os
import sys


def _cmd_quantize(a):
    from . import quant
    if a.what == "formats":
        print(quant.formats_table())
        return 0
    if a.what == "producers":
        print("in-house   asymmetric min/max affine (python/inmotion/quant.py): per_tensor, per_channel,\n"
              "           per_group; 2..8 bits; fp16/bf16 casts")
        return 0
    if a.what == "show":
        if not a.model or not a.format:
            print("error: quantize show needs MODEL and --format", file=sys.stderr)
            return 2
        import numpy as np
        from . import export, train
        m = train.load(a.model)
        sch = quant.parse_scheme(a.format)
        stored, deq, qn = export.quantize_state(m, sch)
        fp32 = sum(v.numel() * 4 for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked"))
        size = sum(v.numel() * v.element_size() for v in stored.values())
        sd = {k: v.numpy() for k, v in m.state_dict().items()}
        print(f"model      : {m.family}")
        print(f"format     : {sch.name} (bits {sch.bits}, {sch.granularity or 'cast'}, group {sch.group_size})")
        print(f"tensors    : {len(stored)} stored, {len(qn)} quantized")
        print(f"size       : {size} bytes ({size / fp32:.3f} of fp32 {fp32})")
        worst = 0.0
        num = den = 0.0
        for k, d in deq.items():
            e = np.abs(d - sd[k])
            worst = max(worst, float(e.max(initial=0)))
            num += float((e.astype(np.float64) ** 2).sum())
            den += float((sd[k].astype(np.float64) ** 2).sum())
        print(f"max |err|  : {worst:.6g}")
        print(f"rel. RMS   : {(num / den) ** 0.5 if den else 0:.6g}")
        return 0
    return 2


def _cmd_export(a):
    from . import data, export, train, fixtures
    m = train.load(a.model)
    windows = names = None
    pre = None
    split = None
    try:
        split = data.load_split()
    except FileNotFoundError:
        pass
    if split is not None and (m.seq_len, m.in_channels) == (10, 4):
        pre = split.preprocess_meta()
        if a.golden:
            windows, names = fixtures.golden_inputs(split, a.windows)
    elif a.golden:
        import numpy as np
        windows = np.random.RandomState(0).randn(a.windows, m.seq_len, m.in_channels).astype(np.float32)
    r = export.export(m, a.out, a.format, tol=a.tol, windows=windows, case_names=names, preprocess=pre,
                      golden=a.golden)
    print(f"wrote {r['dir']} ({r['bytes']} bytes, {r['quantized']} quantized tensors, sha256 {r['sha256']})")
    return 0


def _cmd_export_random(a):
    import numpy as np
    from . import data, export, models
    hp = (models.PUBLISHED if a.published else models.SMALL)[a.family]
    m = models.random_model(a.family, hp, seed=a.seed)
    windows = names = pre = None
    try:
        split = data.load_split()
        pre = split.preprocess_meta()
        from .fixtures import golden_inputs
        windows, names = golden_inputs(split, a.windows)
    except FileNotFoundError:
        windows = np.random.RandomState(a.seed).randn(a.windows, 10, 4).astype(np.float32)
    r = export.export(m, a.out, a.format, tol=a.tol, windows=windows, case_names=names, preprocess=pre,
                      golden=a.golden, prov_extra={"source": f"random weights, seed {a.seed}"
                                                   + (" (published size)" if a.published else "")})
    print(f"wrote {r['dir']} ({r['bytes']} bytes)")
    return 0


def _cmd_train(a):
    import torch
    from . import data, train
    torch.set_num_threads(1)
    split = data.load_split(require_dataset=True)
    m, info = train.train(a.family, split, epochs=a.epochs)
    train.save(m, info, a.out)
    print(f"wrote {a.out}: test MCC {data.mcc(split.yte, train.predict(m, split.Xte)):.4f}")
    return 0


def _cmd_train_all(a):
    from . import data, models, train
    split = data.load_split(require_dataset=True)
    os.makedirs(a.out_dir, exist_ok=True)
    for fam in models.FAMILIES:
        m, info = train.train(fam, split)
        p = os.path.join(a.out_dir, f"{fam}.pt")
        train.save(m, info, p)
        print(f"wrote {p}: test MCC {data.mcc(split.yte, train.predict(m, split.Xte)):.4f}")
    return 0


def _cmd_eval(a):
    from .evaluate import evaluate
    fm = a.formats.split(",") if a.formats else None
    return evaluate(models_dir=a.models_dir, formats=fm, baseline=a.baseline, doc=a.doc,
                    log=lambda s: print(s, file=sys.stderr))


def _cmd_fixtures(a):
    from . import fixtures
    return fixtures.main(untrained=a.untrained, conformance=not a.no_conformance, run_eval=not a.no_eval)


def _cmd_split(a):
    from . import data
    s = data.load_split(require_dataset=True)
    s.write_csvs(a.out)
    print(f"wrote {a.out}/train.csv ({len(s.train_rows)} rows), test.csv ({len(s.test_rows)} rows)")
    return 0


def _cmd_check(a):
    from . import export
    err, tol, n = export.check_golden(a.artifact, a.golden)
    print(f"cases      : {n}\nmax |diff| : {err:.8f}\ntolerance  : {tol:.6f}")
    print("PARITY OK" if err <= tol else "PARITY FAILED")
    return 0 if err <= tol else 1


def build_parser():
    from .models import FAMILIES
    p = argparse.ArgumentParser(prog="inmotion", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    q = sub.add_parser("quantize", help="formats | producers | show MODEL --format F")
    q.add_argument("what", choices=["formats", "producers", "show"])
    q.add_argument("model", nargs="?", help="a .pt checkpoint or an artifact directory")
    q.add_argument("--format")
    q.set_defaults(fn=_cmd_quantize)

    e = sub.add_parser("export", help="MODEL --out DIR --format F: write an inmotion-artifact/1")
    e.add_argument("model", help="a .pt checkpoint (inmotion train) or an artifact directory")
    e.add_argument("--out", required=True)
    e.add_argument("--format", default="fp32")
    e.add_argument("--tol", type=float, default=1e-4)
    e.add_argument("--golden", action=argparse.BooleanOptionalAction, default=True)
    e.add_argument("--windows", type=int, default=16, help="golden cases (real test windows)")
    e.set_defaults(fn=_cmd_export)

    r = sub.add_parser("export-random", help="--family F --out DIR [--published]: random-weight artifact")
    r.add_argument("--family", required=True, choices=FAMILIES)
    r.add_argument("--out", required=True)
    r.add_argument("--published", action="store_true", help="the published sizes (models.PUBLISHED)")
    r.add_argument("--format", default="fp32")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--tol", type=float, default=1e-4)
    r.add_argument("--golden", action=argparse.BooleanOptionalAction, default=True)
    r.add_argument("--windows", type=int, default=8)
    r.set_defaults(fn=_cmd_export_random)

    t = sub.add_parser("train", help="--family F --out MODEL.pt")
    t.add_argument("--family", required=True, choices=FAMILIES)
    t.add_argument("--out", required=True)
    t.add_argument("--epochs", type=int)
    t.set_defaults(fn=_cmd_train)

    ta = sub.add_parser("train-all", help="train the five small models into --out-dir")
    ta.add_argument("--out-dir", default="../target/inmotion/models")
    ta.set_defaults(fn=_cmd_train_all)

    ev = sub.add_parser("eval", help="MCC per model x precision (re-checks the fp32 baseline first)")
    ev.add_argument("--models-dir", help="where {family}_fp32 artifacts are (default tests/fixtures/inmotion)")
    ev.add_argument("--baseline")
    ev.add_argument("--formats", help="comma-separated (default fp32,fp16,bf16,int8,int8_pt,q8,q6,q5,q4,q3,q2)")
    ev.add_argument("--doc", help="also write the markdown table here (docs/inmotion-mcc.md)")
    ev.set_defaults(fn=_cmd_eval)

    f = sub.add_parser("fixtures", help="regenerate tests/fixtures/inmotion/** and docs/inmotion-mcc.md")
    f.add_argument("--untrained", action="store_true", help="random-weight placeholders (no training)")
    f.add_argument("--no-conformance", action="store_true")
    f.add_argument("--no-eval", action="store_true")
    f.set_defaults(fn=_cmd_fixtures)

    s = sub.add_parser("split", help="write the train/test split CSVs")
    s.add_argument("--out", default=None)
    s.set_defaults(fn=_cmd_split)

    c = sub.add_parser("check", help="--artifact DIR: recompute the golden with PyTorch from the artifact")
    c.add_argument("--artifact", required=True)
    c.add_argument("--golden")
    c.set_defaults(fn=_cmd_check)
    return p


def main(argv=None):
    p = build_parser()
    a = p.parse_args(argv)
    if a.cmd == "split" and a.out is None:
        from .data import SPLIT_DIR
        a.out = SPLIT_DIR
    try:
        return a.fn(a) or 0
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
