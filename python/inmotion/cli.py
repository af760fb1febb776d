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
        from . import producers
        print(producers.table())
        return 0
    if a.what == "show":
        import numpy as np
        from . import export, train
        from . import registry
        m = train.load(registry.resolve(a.model))
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


def _check_producer(p):
    from . import producers
    producers.get(p)


def _cmd_export(a):
    _check_producer(a.producer)
    from . import registry
    path = registry.resolve(a.model)
    from . import data, export, train, fixtures
    m = train.load(path)
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
                      golden=a.golden, producer=a.producer)
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


def _results(*parts):
    """Under the repository's results/ (wherever the command runs from)."""
    from .data import REPO
    return os.path.relpath(os.path.join(REPO, "results", *parts))


def _eval_formats():
    from .names import EVAL_FORMATS
    return EVAL_FORMATS


def _export_args(e):
    e.add_argument("model", help="a registered name (inmotion model list), a .pt checkpoint "
                   "(inmotion train) or an artifact directory")
    e.add_argument("--out", required=True)
    e.add_argument("--format", default="fp32")
    e.add_argument("--tol", type=float, default=1e-4)
    e.add_argument("--producer", default="in-house", help="see `inmotion quantize producers`")
    e.add_argument("--golden", action=argparse.BooleanOptionalAction, default=True)
    e.add_argument("--windows", type=int, default=16, help="golden cases (real test windows)")
    e.set_defaults(fn=_cmd_export)


def _cmd_quantize_eval(a):
    for p in a.producer:
        _check_producer(p)
    if a.data:
        if not os.path.isfile(a.data):
            raise FileNotFoundError(f"--data {a.data}: no such file")
        os.environ["INMOTION_DATASET"] = os.path.abspath(a.data)
    if a.seed != 42:
        raise ValueError("--seed: the fp32 baselines were computed on the seed-42 split; "
                         "another seed has no baseline to re-check")
    from . import evaluate
    rows = []
    for p in a.producer:
        rows += evaluate.sweep(models=a.models, formats=a.formats, producer=p,
                               log=lambda s: print(s, file=sys.stderr))
    evaluate.write_sweep(rows, a.out)
    print(f"wrote {a.out} ({len(rows)} rows)")
    return 0


def _cmd_quantize_stats(a):
    if a.latency_iters < 1 or a.latency_warmup < 0:
        raise ValueError("--latency-iters must be at least 1 and --latency-warmup at least 0")
    if not os.path.isfile(a.sweep):
        raise FileNotFoundError(f"--sweep {a.sweep}: no such file (write one with `inmotion quantize eval`)")
    from . import stats
    rows = stats.stats(a.sweep, a.out_dir, a.latency_iters, a.latency_warmup, a.binary,
                       log=lambda s: print(s, file=sys.stderr))
    print(f"wrote {a.out_dir}/summary.csv and summary.md ({len(rows)} rows)")
    return 0


def _cmd_plots(a):
    if not os.path.isfile(a.summary):
        raise FileNotFoundError(f"--summary {a.summary}: no such file (write one with `inmotion quantize stats`)")
    from . import stats
    for p in stats.plots(a.summary, a.out_dir):
        print(f"wrote {p}")
    return 0


def _cmd_model_list(a):
    import json
    from . import registry
    from .names import FAMILIES
    rows = [registry.describe(n) for n in FAMILIES]
    if a.json:
        print(json.dumps(rows))
        return 0
    print(f"{'name':8} {'family':8} {'shape':8} {'classes':>7} {'bytes':>8} {'sha256':6} {'fp32 MCC':>8}  path")
    for r in rows:
        if not r["present"]:
            print(f"{r['name']:8} MISSING  {r['path']}")
            continue
        shape = f"{r['seq_len']}x{r['in_channels']}"
        print(f"{r['name']:8} {r['family']:8} {shape:8} {r['num_classes']:>7} {r['bytes']:>8} "
              f"{'ok' if r['sha256_ok'] else 'BAD':6} {r['fp32_mcc']:>8.4f}  {r['path']}")
    return 0 if all(r["present"] and r["sha256_ok"] for r in rows) else 1


def _cmd_model_verify(a):
    from . import registry
    from .names import FAMILIES
    for n in a.names or FAMILIES:
        r = registry.verify(n)
        print(f"{r['name']}: {r['family']}, {r['parameters']} parameters, {r['buffers']} buffer values: strict load OK")
    return 0


def _cmd_evaluate_checkpoints(a):
    import json
    from . import baselines, data
    from .names import FAMILIES
    res = baselines.evaluate_checkpoints(a.names or FAMILIES, log=lambda s: print(s, file=sys.stderr))
    if a.json:
        print(json.dumps(res))
    else:
        for n, r in res.items():
            for part, s in r.items():
                print(f"{n:24} {part:6} n={s['n']:4} MCC {s['mcc']:.4f} accuracy {s['accuracy']:.4f}")
    if a.doc:
        split = data.load_split()
        desc = (f"Test split: {len(split.test_rows)} windows (stratified 80/20, seed 42), of which "
                f"{int(baselines.clean_mask(split).sum())} clean; models trained on the training split "
                "(`tests/fixtures/inmotion/{family}_fp32`).")
        section = baselines.render(res, desc)
        with open(a.doc, encoding="utf-8") as f:
            text = f.read()
        i = text.find("## Baselines, honestly")
        text = (text[:i] if i >= 0 else text.rstrip("\n") + "\n\n") + section
        with open(a.doc, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {a.doc}")
    return 0


def _cmd_model_predict(a):
    import numpy as np
    from . import data, npref, registry
    art = registry.resolve(a.name)
    if not os.path.isdir(art):
        raise ValueError(f"{art}: model predict needs an artifact directory (export a .pt first)")
    meta, W = npref.load(art)
    header, rows = data.read_csv(a.input)
    cols = [str(i) for i in range(1, meta["seq_len"] + 1)]
    missing = [c for c in cols if c not in header]
    if missing:
        raise ValueError(f"{a.input}: no reading columns {', '.join(missing)} (the dataset's layout)")
    idx = [header.index(c) for c in cols]
    try:
        X = np.array([[float(r[i]) for i in idx] for r in rows], np.float64)
    except (ValueError, IndexError) as e:
        raise ValueError(f"{a.input}: a reading is not a number: {e}") from None
    if not np.isfinite(X).all():
        raise ValueError(f"{a.input}: non-finite readings")
    if a.reference:
        hr, rr = data.read_csv(a.reference)
        Xr = np.array([[float(r[hr.index(c)]) for c in cols] for r in rr], np.float64)
        mean, std = data.fit_scaler(Xr)
    else:
        pre = (meta.get("preprocess") or {}).get("standardize")
        if not pre:
            raise ValueError(f"{art}: the artifact records no preprocess; pass --reference")
        mean, std = np.array(pre["mean"]), np.array(pre["std"])
    Xw = data.preprocess(X, mean, std)
    classes = meta.get("classes") or [str(k) for k in range(meta["num_classes"])]
    li = header.index("label") if "label" in header else None
    print("row,predicted,confidence" + (",label" if li is not None else ""))
    pred = []
    for n, x in enumerate(Xw):
        z = npref.forward(meta, W, x)
        p = np.exp(z - z.max())
        p /= p.sum()
        k = int(np.argmax(p))
        pred.append(k)
        print(f"{n},{classes[k]},{p[k]:.6f}" + (f",{rows[n][li]}" if li is not None else ""))
    if li is not None and all(r[li] in classes for r in rows):
        y = np.array([classes.index(r[li]) for r in rows])
        print(f"{len(rows)} windows: accuracy {np.mean(np.array(pred) == y):.4f}, "
              f"MCC {data.mcc(y, np.array(pred), len(classes)):.4f}", file=sys.stderr)
    return 0


def _cmd_doctor(a):
    import json
    from . import doctor
    r = doctor.report()
    print(json.dumps(r) if a.json else doctor.render(r))
    bad = doctor.problems(r)
    for p in bad:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if bad else 0


def _cmd_datasets_verify(a):
    import json
    from . import doctor
    r = doctor.dataset_report()
    if a.json:
        print(json.dumps(r))
    if not r["found"]:
        print("error: the inMotion dataset was not found: set INMOTION_DATASET", file=sys.stderr)
        return 2
    if not a.json:
        print(f"dataset  : {r['path']}\nrows     : {r['rows']} (expected {r['expected_rows']})\n"
              f"sha256   : {r['sha256']}\nexpected : {r['expected_sha256']}")
        print("DATASET OK" if r["matches"] else "DATASET DIFFERS")
    return 0 if r["matches"] else 1


def build_parser():
    from .names import FAMILIES
    p = argparse.ArgumentParser(prog="inmotion", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    q = sub.add_parser("quantize", help="formats | producers | show | export | eval")
    qs = q.add_subparsers(dest="what", required=True)
    qs.add_parser("formats", help="the presets and the format grammar").set_defaults(fn=_cmd_quantize)
    qs.add_parser("producers", help="what each producer supports").set_defaults(fn=_cmd_quantize)
    qsh = qs.add_parser("show", help="MODEL --format F: sizes and weight error of one format")
    qsh.add_argument("model", help="a registered name (inmotion model list) or a path")
    qsh.add_argument("--format", required=True)
    qsh.set_defaults(fn=_cmd_quantize)
    qe = qs.add_parser("export", help="MODEL --out DIR --format F: write an inmotion-artifact/1")
    _export_args(qe)
    qv = qs.add_parser("eval", help="sweep MCC x format over the models (re-checks the fp32 baselines first)")
    qv.add_argument("--models", nargs="+", help="registered names or paths (default: all five)")
    qv.add_argument("--formats", nargs="+", help="presets or grammar (default: %s)" % " ".join(_eval_formats()))
    qv.add_argument("--producer", nargs="+", default=["in-house"], help="one or more (see quantize producers)")
    qv.add_argument("--data", help="the dataset CSV (default: INMOTION_DATASET, else the committed split)")
    qv.add_argument("--seed", type=int, default=42, help="split seed (the baselines are for 42)")
    qv.add_argument("--out", default=_results("quant", "sweep_dataset.csv"))
    qv.set_defaults(fn=_cmd_quantize_eval)
    qt = qs.add_parser("stats", help="summary tables from a sweep, latency by inmotion-infer bench")
    qt.add_argument("--sweep", default=_results("quant", "sweep_dataset.csv"))
    qt.add_argument("--out-dir", default=_results("quant"))
    qt.add_argument("--latency-iters", type=int, default=200)
    qt.add_argument("--latency-warmup", type=int, default=20)
    qt.add_argument("--binary", help="inmotion-infer (default: INMOTION_INFER, else target/release)")
    qt.set_defaults(fn=_cmd_quantize_stats)

    pl = sub.add_parser("plots", help="quantization: figures from the summary tables")
    pls = pl.add_subparsers(dest="what", required=True)
    pq = pls.add_parser("quantization", help="MCC vs bits, size vs MCC, latency per precision (PNG + SVG)")
    pq.add_argument("--summary", default=_results("quant", "summary.csv"))
    pq.add_argument("--out-dir", default=_results("plots"))
    pq.set_defaults(fn=_cmd_plots)

    e = sub.add_parser("export", help="alias of `quantize export`")
    _export_args(e)

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

    mo = sub.add_parser("model", help="list | verify: the registered trained models")
    ms = mo.add_subparsers(dest="what", required=True)
    ml = ms.add_parser("list", help="name, family, shape, size, checksum, fp32 MCC (no torch needed)")
    ml.add_argument("--json", action="store_true")
    ml.set_defaults(fn=_cmd_model_list)
    mv = ms.add_parser("verify", help="strict load into PyTorch and parameter counts")
    mv.add_argument("names", nargs="*", help="default: all")
    mv.set_defaults(fn=_cmd_model_verify)
    mp = ms.add_parser("predict", help="NAME --input WINDOWS.csv [--reference CSV]: classes of raw windows "
                       "(the spec's numpy forward; no torch)")
    mp.add_argument("name", help="a registered name or an artifact directory")
    mp.add_argument("--input", required=True, help="CSV in the dataset's layout (columns 1..10; label optional)")
    mp.add_argument("--reference", help="CSV whose windows the standardization is fitted on "
                    "(default: the artifact's recorded preprocess)")
    mp.set_defaults(fn=_cmd_model_predict)

    ev2 = sub.add_parser("evaluate", help="checkpoints: per-class metrics, all and clean windows, vs a random forest")
    evs = ev2.add_subparsers(dest="what", required=True)
    ec = evs.add_parser("checkpoints")
    ec.add_argument("names", nargs="*", help="default: all registered models")
    ec.add_argument("--json", action="store_true")
    ec.add_argument("--doc", help="replace the `## Baselines, honestly` section of this markdown file")
    ec.set_defaults(fn=_cmd_evaluate_checkpoints)

    d = sub.add_parser("doctor", help="environment, package versions, the model store, the dataset")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=_cmd_doctor)
    ds = sub.add_parser("datasets", help="verify: checksum and row count of the dataset")
    dss = ds.add_subparsers(dest="what", required=True)
    dv = dss.add_parser("verify")
    dv.add_argument("--json", action="store_true")
    dv.set_defaults(fn=_cmd_datasets_verify)

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
    except ImportError as e:
        print(f"error: `inmotion {a.cmd}` needs {e.name or 'a package'} "
              f"(pip install -r python/inmotion-lock.txt): {e}", file=sys.stderr)
        return 2
