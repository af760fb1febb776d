"""`inmotion fixtures`: regenerate everything under tests/fixtures/inmotion/ deterministically.

  data/{train,test}.csv          the stratified 80/20 split (seed 42) of the dataset's rows
  {family}_{fp32,int8,q4}/       15 artifacts of the trained small models (16 real test windows
                                 in each golden), each with `preprocess` (scaler fitted on train)
  baseline_mcc.json              each fp32 model's test MCC (re-checked by `inmotion eval`)
  conformance/*/                 tiny random-weight artifacts covering the spec's corners
and docs/inmotion-mcc.md (the MCC sweep, `inmotion eval`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np
import torch

from . import data, export, jsonfmt, models, quant, train

FIX = data.FIX_DIR
CONF = os.path.join(FIX, "conformance")
MODEL_CACHE = os.path.join(data.REPO, "target", "inmotion", "models")
FIXTURE_FORMATS = ["fp32", "int8", "q4"]
N_GOLDEN = 16
BASELINE = os.path.join(FIX, "baseline_mcc.json")

# name -> (family, hparams, scheme, options). Tiny (d_model 8-16), random weights.
_T = dict(n_heads=2, num_layers=1)
CONFORMANCE = {
    "lejepa_q2": ("lejepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "q2", {}),
    "t_jepa_q3_pg5": ("t_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, n_reg=1, **_T), "q3_pg5", {}),
    "ts_jepa_q4_pg3": ("ts_jepa", dict(d_model=12, dim_feedforward=24, head_hidden=8, patch_size=5, **_T), "q4_pg3", {}),
    "cf_jepa_q5": ("cf_jepa", dict(d_model=12, dim_feedforward=20, head_hidden=12, **_T), "q5", {}),
    "sigreg_q6_pc": ("sigreg", dict(num_filters=12, num_blocks=1, latent_dim=8), "q6_pc", {}),
    "lejepa_q7_pg7": ("lejepa", dict(d_model=16, n_heads=4, num_layers=2, dim_feedforward=24, head_hidden=10), "q7_pg7", {}),
    "t_jepa_q8": ("t_jepa", dict(d_model=16, dim_feedforward=32, head_hidden=8, n_reg=2, **_T), "q8", {}),
    "cf_jepa_int8_pt": ("cf_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "int8_pt", {}),
    "ts_jepa_int8_pc": ("ts_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, patch_size=2, **_T), "int8_pc", {}),
    "sigreg_q3_pg10": ("sigreg", dict(num_filters=13, num_blocks=2, latent_dim=6), "q3_pg10", {}),
    "lejepa_q5_pt": ("lejepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "q5_pt", {}),
    "lejepa_fp16": ("lejepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "fp16", {}),
    "sigreg_bf16": ("sigreg", dict(num_filters=12, num_blocks=1, latent_dim=8), "bf16", {}),
    "t_jepa_bf16": ("t_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, n_reg=2, **_T), "bf16", {}),
    "cf_jepa_no_classes": ("cf_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "fp32",
                           {"classes": False}),
    "ts_jepa_no_preprocess": ("ts_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, patch_size=2, **_T), "q4",
                              {"preprocess": False}),
    "sigreg_no_sha": ("sigreg", dict(num_filters=9, num_blocks=1, latent_dim=8), "int8", {"sha": False}),
    "lejepa_minimal": ("lejepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "q6",
                       {"classes": False, "preprocess": False, "sha": False, "minimal_provenance": True,
                        "keep_num_batches_tracked": False}),
    # a shape other than 10 x 4 -> 4 (random inputs): seq_len 6, 3 channels, 5 classes
    "t_jepa_t6c3k5": ("t_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, n_reg=1, **_T), "q4_pg6",
                      {"shape": (6, 3, 5), "classes": False, "preprocess": False}),
    "sigreg_t12c3k3": ("sigreg", dict(num_filters=10, num_blocks=1, latent_dim=5), "q7", {"shape": (12, 3, 3),
                       "classes": False, "preprocess": False}),
    # the other producers (python/inmotion/producers.py): the same format, their codes
    "lejepa_q4_pg4_torchao": ("lejepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "q4_pg4",
                              {"producer": "torch-ao"}),
    "ts_jepa_int8_torchao": ("ts_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, patch_size=2, **_T),
                             "int8", {"producer": "torch-ao"}),
    "cf_jepa_q3_pg2_hqq": ("cf_jepa", dict(d_model=8, dim_feedforward=16, head_hidden=8, **_T), "q3_pg2",
                           {"producer": "hqq"}),
}


def sha256_file(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def golden_inputs(split, n=N_GOLDEN):
    idx, X = split.golden_windows(n)
    names = [f"test_row{i}_{data.CLASSES[int(split.yte[i])]}" for i in idx]
    return X, names


def _producer_provenance(producer, extra):
    if producer:
        from . import producers
        extra = dict(extra, producer=producer, producer_version=producers.get(producer).version())
    return extra


def write_conformance(split, log=print, only=None):
    """Writes every conformance artifact (the directory is rewritten), or just those named in
    `only` (the others are left as they are)."""
    if only is None:
        if os.path.isdir(CONF):
            shutil.rmtree(CONF)
        os.makedirs(CONF)
    Xg, names = golden_inputs(split, 4)
    for i, (name, (fam, hp, scheme, opt)) in enumerate(CONFORMANCE.items()):
        if only is not None and name not in only:
            continue
        T, C, K = opt.get("shape", (10, 4, 4))
        m = models.random_model(fam, hp, seed=1000 + i, seq_len=T, in_channels=C, num_classes=K)
        if (T, C) == (10, 4):
            X, cn = Xg, names
        else:
            X = np.random.RandomState(1000 + i).randn(4, T, C).astype(np.float32)
            cn = [f"random{j}" for j in range(4)]
        pre = split.preprocess_meta() if opt.get("preprocess", True) and (T, C) == (10, 4) else None
        out = os.path.join(CONF, name)
        r = export.export(m, out, scheme, windows=X, case_names=cn, preprocess=pre,
                          classes=opt.get("classes", True), sha=opt.get("sha", True),
                          minimal_provenance=opt.get("minimal_provenance", False),
                          keep_num_batches_tracked=opt.get("keep_num_batches_tracked", True),
                          producer=opt.get("producer", "in-house"),
                          prov_extra=_producer_provenance(opt.get("producer"),
                                                          {"source": f"random weights, seed {1000 + i} (conformance)"}))
        log(f"  conformance/{name}: {r['bytes']} bytes, {r['quantized']} quantized tensors")


def fixture_models(split, untrained=False, log=print):
    """-> {family: (model, provenance extra)}."""
    out = {}
    os.makedirs(MODEL_CACHE, exist_ok=True)
    for i, fam in enumerate(models.FAMILIES):
        if untrained:
            m = models.random_model(fam, models.SMALL[fam], seed=i)
            out[fam] = (m, {"source": f"random weights, seed {i} (untrained placeholder)"})
            continue
        log(f"training {fam} ...")
        m, info = train.train(fam, split, log=log)
        train.save(m, info, os.path.join(MODEL_CACHE, f"{fam}.pt"))
        out[fam] = (m, {"source": "trained on the inMotion training split", "training": info})
    return out


def main(untrained=False, conformance=True, run_eval=True, log=print):
    torch.set_num_threads(1)
    split = data.load_split(require_dataset=True)
    split.write_csvs()
    ds_sha = sha256_file(split.source)
    log(f"split: {len(split.train_rows)} train / {len(split.test_rows)} test rows -> {data.SPLIT_DIR}")
    X, names = golden_inputs(split)
    pre = split.preprocess_meta()
    base = {"format": "inmotion-baseline/1", "dataset_sha256": ds_sha,
            "split": "stratified 80/20, seed 42 (sklearn train_test_split equivalent); tests/fixtures/inmotion/data/test.csv",
            "n_test": len(split.test_rows), "untrained": bool(untrained), "mcc": {}}
    for fam, (m, extra) in fixture_models(split, untrained, log).items():
        y = train.predict(m, split.Xte)
        base["mcc"][fam] = data.mcc(split.yte, y)
        extra = dict(extra, dataset_sha256=ds_sha, test_mcc_fp32=base["mcc"][fam])
        for fmt in FIXTURE_FORMATS:
            d = os.path.join(FIX, f"{fam}_{fmt}")
            if os.path.isdir(d):
                shutil.rmtree(d)
            r = export.export(m, d, fmt, windows=X, case_names=names, preprocess=pre, prov_extra=extra)
            log(f"  {fam}_{fmt}: {r['bytes']} bytes")
        log(f"{fam}: fp32 test MCC {base['mcc'][fam]:.4f}")
    jsonfmt.write(BASELINE, base)
    if conformance:
        write_conformance(split, log)
    if run_eval:
        from .evaluate import evaluate
        rc = evaluate(doc=os.path.join(data.REPO, "docs", "inmotion-mcc.md"), log=log)
        if rc:
            return rc
    return 0
