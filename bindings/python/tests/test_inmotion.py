"""kin_infer.inmotion.Model: `inmotion-infer predict`'s probabilities bit for bit, the golden
check, raw readings, and exceptions for bad windows."""

import json
import subprocess

import numpy as np
import pytest

import kin_infer
from kin_infer import inmotion

ARTIFACTS = ["lejepa_fp32", "t_jepa_int8", "ts_jepa_q4", "cf_jepa_fp32", "sigreg_int8"]


def predict(bin_, artifact, window, tmp_path, raw=False):
    f = tmp_path / "w.txt"
    f.write_text("\n".join(",".join(repr(float(v)) for v in np.atleast_1d(row)) for row in window))
    args = [str(bin_), "predict", "--artifact", str(artifact), "--input", str(f), "--json"]
    out = subprocess.run(args + (["--raw"] if raw else []), check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("name", ARTIFACTS)
def test_classify_equals_inmotion_infer_predict(name, inmotion_fixtures, inmotion_bin, tmp_path):
    art = inmotion_fixtures / name
    m = inmotion.Model(str(art))
    rng = np.random.default_rng(7)
    windows = rng.normal(size=(4, m.seq_len, m.in_channels)).astype(np.float32)
    probs = m.classify(windows)
    logits = m.logits(windows)
    assert probs.shape == (4, m.num_classes) and probs.dtype == np.float32
    for i in range(4):
        want = predict(inmotion_bin, art, windows[i], tmp_path)
        assert np.array_equal(probs[i], np.array(want["probabilities"], dtype=np.float32))
        assert np.array_equal(logits[i], np.array(want["logits"], dtype=np.float32))
        assert m.predict(windows[i])[0] == want["class"]
    assert m.check(str(art)).passed


def test_raw_readings_are_preprocessed_as_the_cli_does(inmotion_fixtures, inmotion_bin, tmp_path):
    art = inmotion_fixtures / "lejepa_q4"
    m = inmotion.Model(str(art))
    raw = np.linspace(-80, -40, m.seq_len, dtype=np.float32)
    want = predict(inmotion_bin, art, raw[:, None], tmp_path, raw=True)
    assert np.array_equal(m.classify(raw[None], raw=True)[0],
                          np.array(want["probabilities"], dtype=np.float32))


def test_bad_windows_and_artifacts_raise(inmotion_fixtures, tmp_path):
    m = inmotion.Model(str(inmotion_fixtures / "sigreg_fp32"))
    with pytest.raises(kin_infer.InvalidInputError, match="shape"):
        m.classify(np.zeros((2, m.seq_len + 1, m.in_channels)))
    w = np.zeros((2, m.seq_len, m.in_channels), dtype=np.float32)
    w[1, 0, 0] = np.nan
    with pytest.raises(kin_infer.InvalidInputError, match="window 1"):
        m.classify(w)
    with pytest.raises(kin_infer.InvalidInputError):
        m.classify(np.array([["a"]]))
    with pytest.raises(kin_infer.ModelNotFoundError):
        inmotion.Model(str(tmp_path / "none"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text("{}")
    with pytest.raises(kin_infer.KinInferError, match="meta.json"):
        inmotion.Model(str(bad))
    r = m.check(str(inmotion_fixtures / "sigreg_fp32"))
    assert r.passed and r.cases > 0 and r.max_abs_diff <= r.tolerance
