"""Shared helpers for writing golden files (format `kin-infer-golden/1`, see
/work/shared/specs/golden-format.md).

The writer is deterministic and compact: objects are indented, a list of scalars is written
on one line (so each hidden-state row is one line), floats are written with Python's repr of
the float64 that holds the float32 value exactly (round-trips bit for bit to the f32).
"""

from __future__ import annotations

import json
import math
from typing import Any

FORMAT = "kin-infer-golden/1"


def _scalar(x: Any) -> str:
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"non-finite value {x!r} in golden file")
        return repr(x)
    return json.dumps(x, ensure_ascii=False)


def dumps(obj: Any, level: int = 0) -> str:
    pad = "  " * level
    inner = "  " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dumps(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return "[" + ", ".join(_scalar(v) for v in obj) + "]"
        items = [inner + dumps(v, level + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return _scalar(obj)


def write_golden(path: str, tol: float, cases: list[dict], extra: dict | None = None) -> None:
    doc: dict[str, Any] = {"format": FORMAT, "tol": tol}
    if extra:
        doc.update(extra)
    doc["cases"] = cases
    text = dumps(doc) + "\n"
    json.loads(text)  # self-check: valid JSON
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def f32_list(t) -> list:
    """A torch tensor / numpy array of float32 -> nested lists of Python floats (exact)."""
    import numpy as np

    a = t.detach().cpu().float().numpy() if hasattr(t, "detach") else np.asarray(t, dtype=np.float32)
    return a.astype(np.float64).tolist()


def package_versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "sentence_transformers", "safetensors", "numpy", "tokenizers"):
        try:
            mod = __import__(name)
            out[name.replace("_", "-")] = str(mod.__version__)
        except Exception:  # pragma: no cover - informational only
            pass
    return out
