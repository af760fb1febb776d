#!/usr/bin/env python3
"""Checks of the inMotion Python side (python/inmotion) and its committed artifacts.

    python3 python/test_inmotion.py          # or: python -m pytest python/test_inmotion.py

numpy only (always run):
- `test_pack_roundtrip`: packing of codes for every width 2..8 against a naive bit-by-bit
  packer (little-endian, LSB-first, each row on a byte boundary), and unpacking back.
- `test_dequantize`: quantize -> dequantize error bounded by scale/2 for every granularity, and
  the stored arithmetic is `scale * (u - zero)` in f32; per_tensor repeats one value per row.
- `test_scheme_grammar`: presets and the q{bits}_pg{group} grammar.
- `test_split_and_mcc`: the numpy stratified split equals the committed split CSVs (and
  scikit-learn's train_test_split / matthews_corrcoef when importable); needs the dataset.
- `test_artifacts_format`: every committed artifact under tests/fixtures/inmotion has a valid
  meta.json (required fields, quantization tensors present with the right shapes) and golden.
- `test_artifacts_spec_forward`: an independent numpy implementation of the spec's graph
  (inmotion/npref.py, reading the safetensors bytes itself) reproduces every golden.
torch (skipped without it):
- `test_export_reload`: export -> reload (dequantize) gives back the exported weights for every
  format, and re-exporting is byte-identical (deterministic).
- `test_published_sizes`: random-weight artifacts at the published sizes (`inmotion
  export-random --published`) agree with the numpy spec forward.
- `test_goldens_reverify`: every committed golden is recomputed by PyTorch from its artifact.
The `inmotion` command line (python/inmotion/cli.py):
- `test_grammar_without_torch`: model list, doctor, producers, formats, refusals (numpy only).
- `test_model_predict_reproduces_the_baseline`: `model predict` (numpy forward) gives the
  recorded MCC on the test split.
- `test_datasets_verify`: checksum and row count, and a changed dataset refused (dataset).
- `test_quantize_export_and_eval_grammar`: `quantize export lejepa ...` on a registered name,
  checked by inmotion-infer; `quantize eval` writes the sweep, refuses a changed dataset (torch).
- `test_producers_round_trip`: torch-ao / hqq codes dequantize as the libraries do; their
  exports pass inmotion-infer check (torch + torchao / hqq).
- `test_evaluate_checkpoints`: per-class metrics, all and clean windows, the doc section (torch).
- `test_bench_grid_guard`: scripts/bench-grid.sh refuses a scratch directory in the checkout.
- `test_plots_from_the_committed_tables`: `plots quantization` writes PNG + SVG (matplotlib).
- `test_stats_from_a_small_sweep`: `quantize stats` tables with inmotion-infer latency (torch).
"""

from __future__ import annotations

import glob
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FIX = os.path.join(REPO, "tests", "fixtures", "inmotion")
sys.path.insert(0, HERE)
from testkit import run_tests, skip  # noqa: E402


def need_numpy():
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        skip(str(e))


def need_torch():
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        skip(f"torch stack not importable: {e}")


def artifact_dirs():
    return sorted(os.path.dirname(p) for p in glob.glob(os.path.join(FIX, "**", "meta.json"), recursive=True))


def naive_pack(codes, bits):
    out = []
    for row in codes:
        nbytes = -(-len(row) * bits // 8)
        b = [0] * nbytes
        pos = 0
        for c in row:
            for k in range(bits):
                if (int(c) >> k) & 1:
                    b[pos // 8] |= 1 << (pos % 8)
                pos += 1
        out.append(b)
    return out


def test_pack_roundtrip():
    need_numpy()
    import numpy as np
    from inmotion import quant
    rng = np.random.RandomState(0)
    for bits in range(2, 9):
        for rows, cols in [(1, 1), (1, 7), (3, 5), (4, 13), (2, 32), (5, 33)]:
            u = rng.randint(0, 1 << bits, size=(rows, cols))
            p = quant.pack_codes(u, bits)
            assert p.dtype == np.uint8 and p.shape == (rows, quant.bytes_per_row(cols, bits)), (bits, rows, cols)
            assert p.tolist() == naive_pack(u, bits), f"pack bits={bits} {rows}x{cols}"
            assert (quant.unpack_codes(p, bits, cols) == u).all(), f"unpack bits={bits}"


def test_dequantize():
    need_numpy()
    import numpy as np
    from inmotion import quant
    rng = np.random.RandomState(1)
    w = rng.randn(7, 45).astype(np.float32)
    for bits in range(2, 9):
        for gran, gs in [("per_tensor", 0), ("per_channel", 0), ("per_group", 32), ("per_group", 7), ("per_group", 1)]:
            u, s, z = quant.quantize_matrix(w, bits, gran, gs)
            G = quant.n_groups(45, gran, gs)
            assert s.shape == (7, G) and z.shape == (7, G) and s.dtype == np.float32
            assert u.max() < (1 << bits)
            d = quant.dequantize_matrix(u, s, z, gran, gs)
            gi = np.arange(45) // gs if gran == "per_group" else np.zeros(45, int)
            ref = (s[:, gi] * (u.astype(np.float32) - z[:, gi])).astype(np.float32)
            assert (d == ref).all()
            err = np.abs(d - w)
            assert (err <= s[:, gi] * 0.5 + 1e-5).all(), (bits, gran, gs, float(err.max()))
            if gran == "per_tensor":
                assert (s == s[0, 0]).all() and (z == z[0, 0]).all()
    # constant rows (scale would be 0) and one-row tensors
    c = np.full((1, 9), 0.25, np.float32)
    u, s, z = quant.quantize_matrix(c, 4, "per_channel", 0)
    assert (quant.dequantize_matrix(u, s, z, "per_channel", 0) == c).all()


def test_scheme_grammar():
    need_numpy()
    from inmotion import quant
    assert quant.parse_scheme("int8").granularity == "per_channel"
    assert quant.parse_scheme("int8_pt").granularity == "per_tensor"
    assert quant.parse_scheme("int8_pc").bits == 8
    s = quant.parse_scheme("q3_pg7")
    assert (s.bits, s.granularity, s.group_size) == (3, "per_group", 7)
    assert quant.parse_scheme("q4").group_size == quant.DEFAULT_GROUP
    for bad in ["q1", "q9", "q4_pg0", "int4", "fp8"]:
        try:
            quant.parse_scheme(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{bad} accepted")


def test_split_and_mcc():
    need_numpy()
    import numpy as np
    from inmotion import data
    p = data.dataset_path()
    if not p:
        skip("inMotion dataset not found (INMOTION_DATASET)")
    header, rows = data.read_csv(p)
    _, y = data.readings_labels(header, rows)
    tr, te = data.stratified_split(y)
    assert len(tr) + len(te) == len(y) and not set(tr) & set(te)
    for name, idx in (("train", tr), ("test", te)):
        h, committed = data.read_csv(os.path.join(FIX, "data", f"{name}.csv"))
        assert h == header and committed == [rows[i] for i in idx], f"{name}.csv differs from the split"
    try:
        from sklearn.metrics import matthews_corrcoef
        from sklearn.model_selection import train_test_split
    except Exception:  # absent (or broken): the committed CSVs above are the contract
        return
    a, b = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=42)
    assert (a == tr).all() and (b == te).all(), "split differs from scikit-learn"
    yp = np.random.RandomState(0).randint(0, 4, len(y))
    assert abs(matthews_corrcoef(y, yp) - data.mcc(y, yp)) < 1e-12


REQUIRED_HP = {
    "lejepa": ["d_model", "n_heads", "num_layers", "dim_feedforward", "head_hidden"],
    "cf_jepa": ["d_model", "n_heads", "num_layers", "dim_feedforward", "head_hidden"],
    "t_jepa": ["d_model", "n_heads", "num_layers", "dim_feedforward", "head_hidden", "n_reg"],
    "ts_jepa": ["d_model", "n_heads", "num_layers", "dim_feedforward", "head_hidden", "patch_size"],
    "sigreg": ["num_filters", "num_blocks", "latent_dim"],
}


def test_artifacts_format():
    need_numpy()
    import numpy as np
    from inmotion import npref, quant
    dirs = artifact_dirs()
    assert len(dirs) >= 15, f"only {len(dirs)} artifacts under {FIX}"
    for d in dirs:
        where = os.path.relpath(d, REPO)
        meta = json.load(open(os.path.join(d, "meta.json")))
        assert meta["format"] == "inmotion-artifact/1", where
        for k in ("seq_len", "in_channels", "num_classes"):
            assert isinstance(meta[k], int) and meta[k] > 0, f"{where}: {k}"
        for k in REQUIRED_HP[meta["model"]]:
            assert isinstance(meta["hparams"][k], int), f"{where}: hparams.{k}"
        assert "exporter" in meta["provenance"] and "torch_version" in meta["provenance"], where
        if "classes" in meta:
            assert len(meta["classes"]) == meta["num_classes"], where
        if "preprocess" in meta:
            pp = meta["preprocess"]
            assert len(pp["features"]) == meta["in_channels"], where
            assert len(pp["standardize"]["mean"]) == meta["seq_len"] == len(pp["standardize"]["std"]), where
        st = npref.read_safetensors(os.path.join(d, "model.safetensors"))
        q = meta["quantization"]
        if "bits" in q:
            assert 2 <= q["bits"] <= 8 and q["granularity"] in ("per_tensor", "per_channel", "per_group"), where
            for t in q["tensors"]:
                codes, scale, zero = (st[t + s] for s in (".__q", ".__scale", ".__zero"))
                assert codes[0] == "U8" and scale[0] == "F32" and zero[0] == "F32", f"{where}: {t}"
                rows = codes[1].shape[0]
                cols = npref._logical_cols(t, meta, rows)
                assert codes[1].shape == (rows, quant.bytes_per_row(cols, q["bits"])), f"{where}: {t}.__q"
                G = quant.n_groups(cols, q["granularity"], q["group_size"])
                assert scale[1].shape == (rows, G) == zero[1].shape, f"{where}: {t} scale/zero"
                if q["granularity"] == "per_tensor":
                    assert (scale[1] == scale[1][0, 0]).all(), f"{where}: {t} per_tensor"
                assert t not in st, f"{where}: {t} stored both dense and quantized"
        want = {"fp16": "F16", "bf16": "BF16"}.get(q["scheme"], "F32")
        for k, (dt, _) in st.items():
            if not k.endswith(("num_batches_tracked", ".__q", ".__scale", ".__zero")):
                assert dt == want, f"{where}: {k} is {dt}, want {want}"
        g = json.load(open(os.path.join(d, "golden.json")))
        assert g["format"] == "kin-infer-golden/1" and g["tol"] > 0 and g["cases"], where
        for c in g["cases"]:
            assert c["kind"] == "classify", where
            assert np.array(c["input"]).shape == (meta["seq_len"], meta["in_channels"]), where
            assert len(c["expected"]) == meta["num_classes"], where
            assert all(math.isfinite(v) for v in c["expected"]), where


def test_artifacts_spec_forward():
    need_numpy()
    from inmotion import npref
    worst = 0.0
    for d in artifact_dirs():
        err = npref.check(d)
        tol = json.load(open(os.path.join(d, "golden.json")))["tol"]
        assert err <= tol / 10, f"{os.path.relpath(d, REPO)}: numpy spec forward off by {err:.3g}"
        worst = max(worst, err)


def test_export_reload():
    need_torch()
    import numpy as np
    from inmotion import export, models, quant
    X = np.random.RandomState(3).randn(3, 10, 4).astype(np.float32)
    for i, fam in enumerate(models.FAMILIES):
        hp = {"sigreg": dict(num_filters=10, num_blocks=1, latent_dim=6)}.get(
            fam, dict(d_model=8, n_heads=2, num_layers=1, dim_feedforward=12, head_hidden=8, n_reg=1, patch_size=2))
        m = models.random_model(fam, hp, seed=i)
        for fmt in ["fp32", "fp16", "bf16", "int8", "int8_pt", "q8", "q7_pg5", "q6", "q5_pg3", "q4", "q3", "q2_pg1"]:
            with tempfile.TemporaryDirectory() as t1, tempfile.TemporaryDirectory() as t2:
                export.export(m, t1, fmt, windows=X)
                export.export(m, t2, fmt, windows=X)
                for f in ("meta.json", "model.safetensors", "golden.json"):
                    assert open(os.path.join(t1, f), "rb").read() == open(os.path.join(t2, f), "rb").read(), \
                        f"{fam} {fmt}: {f} not deterministic"
                _, deq, qn = export.quantize_state(m, quant.parse_scheme(fmt))
                back, meta = export.load_artifact(t1)
                for k, v in back.state_dict().items():
                    if k in deq:
                        assert (v.numpy() == deq[k]).all(), f"{fam} {fmt}: {k} reloads differently"
                err, tol, _ = export.check_golden(t1)
                assert err == 0.0, f"{fam} {fmt}: golden recomputes with |diff| {err}"
                if fmt not in ("fp32", "fp16", "bf16"):
                    assert len(qn) == len(meta["quantization"]["tensors"]) > 0


def test_published_sizes():
    need_torch()
    from inmotion import cli, npref
    for fam in ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"]:
        with tempfile.TemporaryDirectory() as t:
            assert cli.main(["export-random", "--family", fam, "--published", "--format", "q5_pg48",
                             "--out", t, "--windows", "2"]) == 0
            err = npref.check(t)
            assert err <= 1e-5, f"published {fam}: numpy spec forward off by {err:.3g}"


def test_goldens_reverify():
    need_torch()
    from inmotion import export
    for d in artifact_dirs():
        err, tol, n = export.check_golden(d)
        assert err <= tol / 10, f"{os.path.relpath(d, REPO)}: PyTorch recomputes the golden off by {err:.3g}"


def _cli(*args, env=None):
    """`python3 -m inmotion ARGS` from python/: (exit code, stdout, stderr)."""
    import subprocess
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-m", "inmotion", *args], cwd=HERE, capture_output=True,
                       text=True, env=e)
    return p.returncode, p.stdout, p.stderr


def test_grammar_without_torch():
    """The documented grammar parses, and what needs no torch runs (the registry, doctor,
    producers, refusals); what needs torch is covered below."""
    need_numpy()
    rc, out, _ = _cli("model", "list", "--json")
    rows = json.loads(out)
    assert rc == 0 and [r["name"] for r in rows] == ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"]
    assert all(r["present"] and r["sha256_ok"] and 0 < r["fp32_mcc"] < 1 for r in rows)
    rc, out, _ = _cli("doctor", "--json")
    r = json.loads(out)
    assert r["packages"]["numpy"] and len(r["models"]) == 5 and "dataset" in r
    rc, out, _ = _cli("quantize", "producers")
    assert rc == 0 and "in-house" in out
    rc, out, _ = _cli("quantize", "formats")
    assert rc == 0 and "q4" in out
    rc, _, err = _cli("quantize", "export", "lejepa", "--out", os.path.join(tempfile.mkdtemp(), "a"),
                      "--format", "q4", "--producer", "nonesuch")
    assert rc == 2 and "unknown producer `nonesuch` (expected one of: in-house, torch-ao, hqq)" in err
    from inmotion import producers, quant
    for name, fmt, cols, why in [("hqq", "q6", 64, "2, 3, 4 or 8 bits"), ("hqq", "q4_pt", 64, "per tensor")]:
        p = producers.get(name)
        if p.version() != "not installed":
            try:
                producers.require(p, quant.parse_scheme(fmt), cols, "w")
            except ValueError as e:
                assert why in str(e), e
            else:
                raise AssertionError(f"{name} {fmt} accepted")
    rc, _, err = _cli("quantize", "eval", "--seed", "7")
    assert rc == 2 and "seed" in err
    rc, _, err = _cli("quantize", "export", "no_such_model", "--out", "/tmp/x")
    assert rc == 2 and "registered name" in err
    rc, _, err = _cli("quantize", "nonsense")
    assert rc == 2 and "invalid choice" in err


def test_model_predict_reproduces_the_baseline():
    """`model predict` (the spec's numpy forward, no torch) on the committed test split gives the
    recorded fp32 MCC; a CSV without the reading columns is refused."""
    need_numpy()
    test_csv = os.path.join(FIX, "data", "test.csv")
    rc, out, err = _cli("model", "predict", "sigreg", "--input", test_csv)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "row,predicted,confidence,label" and len(lines) == 704
    with open(os.path.join(FIX, "baseline_mcc.json")) as f:
        want = json.load(f)["mcc"]["sigreg"]
    assert f"MCC {want:.4f}" in err, err
    bad = os.path.join(tempfile.mkdtemp(), "bad.csv")
    with open(bad, "w") as f:
        f.write("a,b\n1,2\n")
    rc, _, err = _cli("model", "predict", "sigreg", "--input", bad)
    assert rc == 2 and "no reading columns" in err


def test_datasets_verify():
    need_numpy()
    from inmotion import data
    if data.dataset_path() is None:
        skip("inMotion dataset not found (INMOTION_DATASET)")
    rc, out, _ = _cli("datasets", "verify", "--json")
    r = json.loads(out)
    assert rc == 0 and r["rows"] == 3511 and r["matches"]
    d = tempfile.mkdtemp()
    changed = os.path.join(d, "dataset.csv")
    with open(data.dataset_path(), encoding="utf-8") as f:
        lines = f.readlines()
    with open(changed, "w", encoding="utf-8") as f:
        f.writelines(lines[:-1])
    rc, out, _ = _cli("datasets", "verify", env={"INMOTION_DATASET": changed})
    assert rc == 1 and "DATASET DIFFERS" in out


def test_quantize_export_and_eval_grammar():
    """`inmotion quantize export lejepa --out DIR --format q4 --tol 1e-4` on a fresh clone (a
    registered name, no training), checked by inmotion-infer when built; `quantize eval` writes
    the sweep CSV after re-checking the baselines, and refuses a changed dataset."""
    need_torch()
    import csv
    import subprocess
    d = tempfile.mkdtemp()
    art = os.path.join(d, "art-lejepa-q4")
    rc, out, err = _cli("quantize", "export", "lejepa", "--out", art, "--format", "q4", "--tol", "1e-4")
    assert rc == 0, err
    binary = os.path.join(REPO, "target", "release", "inmotion-infer")
    if os.path.isfile(binary):
        p = subprocess.run([binary, "check", "--artifact", art, "--golden", art], capture_output=True, text=True)
        assert p.returncode == 0 and "PARITY OK" in p.stdout, p.stdout + p.stderr
    sweep = os.path.join(d, "sweep.csv")
    rc, out, err = _cli("quantize", "eval", "--models", "lejepa", "sigreg", "--formats", "fp32", "q4",
                        "--out", sweep)
    assert rc == 0, err
    # Progress on stderr: a count and the elapsed time per model x format, then a summary.
    assert "[1/4, " in err and "[4/4, " in err and "sweep: 4 rows" in err, err
    with open(sweep) as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["format"]) for r in rows] == [("lejepa", "fp32"), ("lejepa", "q4"),
                                                         ("sigreg", "fp32"), ("sigreg", "q4")]
    assert float(rows[0]["max_abs_diff"]) == 0.0 and int(rows[1]["size_bytes"]) < int(rows[0]["size_bytes"])
    from inmotion import data
    if data.dataset_path() is not None:
        changed = os.path.join(d, "dataset.csv")
        with open(data.dataset_path(), encoding="utf-8") as f:
            lines = f.readlines()
        with open(changed, "w", encoding="utf-8") as f:
            f.writelines(lines[:-1])
        rc, _, err = _cli("quantize", "eval", "--models", "lejepa", "--data", changed, "--out", sweep)
        assert rc == 2 and "not the baseline's dataset" in err, err


def test_producers_round_trip():
    """torch-ao and hqq codes, read back into the artifact's (codes, scale, zero), dequantize to
    exactly what the library itself dequantizes to; each producer's export passes
    inmotion-infer check."""
    need_torch()
    import subprocess
    import numpy as np
    import torch
    from inmotion import producers, quant
    rng = np.random.RandomState(3)
    w = rng.randn(6, 64).astype(np.float32)
    ran = 0
    if producers.get("torch-ao").version() != "not installed":
        from torchao.quantization.quant_primitives import (MappingType, choose_qparams_affine,
                                                           dequantize_affine, quantize_affine)
        t = torch.from_numpy(w)
        for bits, mapping, dt, lo, hi, shift in [(8, MappingType.SYMMETRIC, torch.int8, -128, 127, 128),
                                                 (4, MappingType.ASYMMETRIC, torch.uint8, 0, 15, 0)]:
            u, sc, zp = producers.get("torch-ao").matrix(w, bits, "per_channel", 0)
            s, z = choose_qparams_affine(t, mapping, (1, 64), dt, lo, hi, eps=torch.finfo(torch.float32).eps,
                                         scale_dtype=torch.float32, zero_point_dtype=torch.int32)
            q = quantize_affine(t, (1, 64), s, z, dt, lo, hi)
            ref = dequantize_affine(q, (1, 64), s, z, dt, lo, hi, output_dtype=torch.float32).numpy()
            ours = quant.dequantize_matrix(u, sc, zp, "per_channel", 0)
            assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32)), f"torch-ao {bits} bits"
            assert np.array_equal(u.astype(np.int32) - shift, q.to(torch.int32).numpy())
        ran += 1
    if producers.get("hqq").version() != "not installed":
        from hqq.core.quantize import Quantizer
        # 64 columns in groups of 16 (the layout HQQ and the artifact share); a 70-column
        # matrix's last group of 6 is solved on its own.
        u7, s7, z7 = producers.get("hqq").matrix(rng.randn(6, 70).astype(np.float32), 3, "per_group", 16)
        assert u7.shape == (6, 70) and s7.shape == (6, 5) and int(u7.max()) <= 7
        u, sc, zp = producers.get("hqq").matrix(w, 4, "per_group", 16)
        Wq, meta = Quantizer.quantize(torch.from_numpy(w), nbits=4, channel_wise=True, group_size=16,
                                      optimize=True, round_zero=False, axis=1, bitpack=False,
                                      compute_dtype=torch.float32, device="cpu")
        ref = Quantizer.dequantize(Wq, meta).reshape(6, 64).numpy()
        ours = quant.dequantize_matrix(u, sc, zp, "per_group", 16)
        assert np.abs(ours - ref).max() <= 1e-6 * np.abs(ref).max(), "hqq"
        ran += 1
    if not ran:
        skip("neither torchao nor hqq installed")
    binary = os.path.join(REPO, "target", "release", "inmotion-infer")
    for prod in ("torch-ao", "hqq"):
        if producers.get(prod).version() == "not installed":
            continue
        art = os.path.join(tempfile.mkdtemp(), "a")
        rc, _, err = _cli("quantize", "export", "lejepa", "--out", art, "--format", "q4_pg16", "--producer", prod)
        assert rc == 0, err
        with open(os.path.join(art, "meta.json")) as f:
            assert json.load(f)["quantization"]["producer"] == prod
        if os.path.isfile(binary):
            p = subprocess.run([binary, "check", "--artifact", art, "--golden", art], capture_output=True, text=True)
            assert p.returncode == 0 and "PARITY OK" in p.stdout, p.stdout + p.stderr


def test_evaluate_checkpoints():
    """Per-class metrics on all and clean test windows (torch)."""
    need_torch()
    rc, out, err = _cli("evaluate", "checkpoints", "lejepa", "sigreg", "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert abs(r["lejepa"]["all"]["mcc"] - 0.32665130612997645) < 1e-9 and r["lejepa"]["all"]["n"] == 703
    assert r["sigreg"]["clean"]["n"] == 37 and len(r["sigreg"]["all"]["per_class"]) == 4
    d = tempfile.mkdtemp()
    doc = os.path.join(d, "mcc.md")
    with open(doc, "w") as f:
        f.write("# table\n")
    rc, _, err = _cli("evaluate", "checkpoints", "sigreg", "--doc", doc)
    assert rc == 0, err
    with open(doc) as f:
        text = f.read()
    assert text.startswith("# table\n") and "## Baselines, honestly" in text and "| sigreg |" in text


def test_bench_grid_guard():
    """scripts/bench-grid.sh refuses a scratch directory inside the checkout (where `before` is
    checked out and built) before it builds or writes anything, and an unknown mode."""
    import subprocess
    script = os.path.join(REPO, "scripts", "bench-grid.sh")
    inside = os.path.join(REPO, "target", "bench-grid-guard-test")
    p = subprocess.run(["bash", script, "host", "--scratch", inside], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2 and "inside the checkout" in p.stderr, p.stderr
    assert not os.path.exists(inside), "the refused scratch directory was created"
    p = subprocess.run(["bash", script, "laptop"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2 and "host or router" in p.stderr
    p = subprocess.run(["bash", script, "host", "--before", "no-such-revision-xyz"], capture_output=True,
                       text=True, cwd=REPO)
    assert p.returncode == 2 and "not a revision" in p.stderr


def test_plots_from_the_committed_tables():
    """`plots quantization` renders the committed results/quant/summary.csv (matplotlib only)."""
    need_numpy()
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        skip(f"matplotlib not importable: {e}")
    out = tempfile.mkdtemp()
    rc, stdout, err = _cli("plots", "quantization", "--out-dir", out)
    assert rc == 0, err
    names = sorted(os.listdir(out))
    assert names == sorted(f"quant_{n}.{e}" for n in ("mcc_vs_bits", "size_vs_mcc", "latency", "producers")
                           for e in ("png", "svg")), names
    for n in names:
        with open(os.path.join(out, n), "rb") as f:
            head = f.read(8)
        assert os.path.getsize(os.path.join(out, n)) > 5000
        assert head.startswith(b"\x89PNG") if n.endswith(".png") else b"<?xml" in head or b"<svg" in head
    rc, _, err = _cli("plots", "quantization", "--summary", os.path.join(out, "none.csv"))
    assert rc == 2 and "no such file" in err


def test_stats_from_a_small_sweep():
    """`quantize stats` turns a sweep into the summary tables, latency from inmotion-infer."""
    need_torch()
    import csv
    binary = os.path.join(REPO, "target", "release", "inmotion-infer")
    if not os.path.isfile(binary):
        skip("target/release/inmotion-infer not built")
    d = tempfile.mkdtemp()
    sweep = os.path.join(d, "sweep.csv")
    rc, _, err = _cli("quantize", "eval", "--models", "sigreg", "--formats", "fp32", "int8", "q4", "--out", sweep)
    assert rc == 0, err
    rc, _, err = _cli("quantize", "stats", "--sweep", sweep, "--out-dir", d, "--latency-iters", "5",
                      "--latency-warmup", "1", "--binary", binary)
    assert rc == 0, err
    with open(os.path.join(d, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [r["format"] for r in rows] == ["fp32", "int8", "q4"]
    assert float(rows[0]["mcc_delta"]) == 0 and float(rows[2]["compression"]) > 3
    assert all(float(r["latency_ms"]) > 0 for r in rows) and rows[1]["bits"] == "8"
    with open(os.path.join(d, "summary.md")) as f:
        assert "| sigreg | q4 | 4 |" in f.read()


def main():
    return run_tests(globals())


if __name__ == "__main__":
    sys.exit(main())
