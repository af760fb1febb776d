"""The committed trained models, by family name, so that `inmotion quantize export lejepa ...`
works on a fresh clone with no training: each family's fp32 artifact under
tests/fixtures/inmotion/ (trained by `inmotion fixtures` on the public dataset; their MCCs are
recorded in baseline_mcc.json). A MODEL argument is one of these names, or a path (a `.pt`
checkpoint from `inmotion train`, or an artifact directory)."""

from __future__ import annotations

import hashlib
import json
import os

from .data import FIX_DIR
from .names import FAMILIES

BASELINE = os.path.join(FIX_DIR, "baseline_mcc.json")


def model_dir(name: str) -> str:
    return os.path.join(FIX_DIR, f"{name}_fp32")


def resolve(model: str) -> str:
    """A registered name → its artifact directory; an existing path → itself."""
    if model in FAMILIES:
        return model_dir(model)
    if os.path.exists(model):
        return model
    raise FileNotFoundError(
        f"model `{model}` is neither a registered name ({', '.join(FAMILIES)}) nor an existing "
        f"path (a .pt checkpoint or an artifact directory)")


def baseline() -> dict:
    with open(BASELINE, encoding="utf-8") as f:
        return json.load(f)


def describe(name: str) -> dict:
    """What `model list` shows, from meta.json and the weights file (no torch needed)."""
    d = model_dir(name)
    row = {"name": name, "path": os.path.relpath(d), "present": os.path.isdir(d)}
    if not row["present"]:
        return row
    with open(os.path.join(d, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    st = os.path.join(d, "model.safetensors")
    with open(st, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    row.update({
        "family": meta.get("model"),
        "seq_len": meta.get("seq_len"),
        "in_channels": meta.get("in_channels"),
        "num_classes": meta.get("num_classes"),
        "bytes": os.path.getsize(st),
        "sha256_ok": meta.get("weights_sha256") in (None, digest),
        "fp32_mcc": baseline().get("mcc", {}).get(name),
    })
    return row


def verify(name: str) -> dict:
    """Strict load into the PyTorch module (every tensor present, no extra, shapes equal) and
    parameter counts; needs torch."""
    from .export import load_artifact
    m, _ = load_artifact(resolve(name))
    params = sum(p.numel() for p in m.parameters())
    buffers = sum(b.numel() for n, b in m.named_buffers() if not n.endswith("num_batches_tracked"))
    return {"name": name, "family": m.family, "parameters": params, "buffers": buffers}
