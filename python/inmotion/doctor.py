"""`inmotion doctor` (environment, package versions, the artifact store, the dataset) and
`inmotion datasets verify` (checksum and row count of the dataset against the baseline)."""

from __future__ import annotations

import hashlib
import importlib
import os
import platform
import shutil
import sys

from . import data, registry
from .names import FAMILIES

#: The public inMotion dataset the baselines were computed on.
EXPECTED_ROWS = 3511
PACKAGES = ["numpy", "safetensors", "torch", "torchao", "hqq", "matplotlib"]


def _version(name):
    try:
        mod = importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - any import failure is "not usable"
        return None if isinstance(e, ImportError) else f"broken ({type(e).__name__}: {e})"
    return getattr(mod, "__version__", "installed")


def inmotion_infer():
    """The `inmotion-infer` binary: INMOTION_INFER, else target/release/inmotion-infer, else PATH."""
    p = os.environ.get("INMOTION_INFER")
    if p:
        return p if os.path.isfile(p) else None
    p = os.path.join(data.REPO, "target", "release", "inmotion-infer")
    if os.path.isfile(p):
        return p
    return shutil.which("inmotion-infer")


def dataset_report() -> dict:
    """Path, sha256, data rows, and whether they match the baseline's dataset."""
    p = data.dataset_path()
    want = registry.baseline().get("dataset_sha256")
    if p is None:
        return {"path": None, "found": False, "expected_sha256": want, "expected_rows": EXPECTED_ROWS}
    with open(p, "rb") as f:
        raw = f.read()
    rows = max(0, raw.count(b"\n") - 1 + (0 if raw.endswith(b"\n") or not raw else 1))
    digest = hashlib.sha256(raw).hexdigest()
    return {"path": p, "found": True, "sha256": digest, "rows": rows, "expected_sha256": want,
            "expected_rows": EXPECTED_ROWS, "matches": digest == want and rows == EXPECTED_ROWS}


def report() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {n: _version(n) for n in PACKAGES},
        "inmotion_infer": inmotion_infer(),
        "models": [registry.describe(n) for n in FAMILIES],
        "dataset": dataset_report(),
    }


def render(r: dict) -> str:
    out = [f"python        : {r['python']} ({r['platform']})"]
    for n, v in r["packages"].items():
        out.append(f"{n:14}: {v or 'not installed'}")
    out.append(f"inmotion-infer: {r['inmotion_infer'] or 'not found (cargo build --release -p inmotion-cli, or INMOTION_INFER)'}")
    for m in r["models"]:
        if not m["present"]:
            out.append(f"model {m['name']:8}: MISSING at {m['path']}")
        else:
            ok = "sha256 ok" if m["sha256_ok"] else "SHA256 MISMATCH"
            out.append(f"model {m['name']:8}: {m['path']} ({m['bytes']} bytes, {ok}, fp32 MCC {m['fp32_mcc']:.4f})")
    d = r["dataset"]
    if not d["found"]:
        out.append("dataset       : not found (set INMOTION_DATASET to dataset.csv); the committed split is used")
    else:
        verdict = "matches the baseline" if d["matches"] else "DIFFERS from the baseline's dataset"
        out.append(f"dataset       : {d['path']} ({d['rows']} rows, sha256 {d['sha256'][:16]}..., {verdict})")
    return "\n".join(out)


def problems(r: dict) -> list:
    p = [f"model {m['name']} missing" for m in r["models"] if not m["present"]]
    p += [f"model {m['name']} sha256 mismatch" for m in r["models"] if m["present"] and not m["sha256_ok"]]
    if r["dataset"]["found"] and not r["dataset"]["matches"]:
        p.append("dataset differs from the baseline's")
    if r["packages"]["numpy"] is None:
        p.append("numpy not installed")
    return p
