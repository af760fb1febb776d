"""Shared helpers for writing golden files (format `kin-infer-golden/1`, see
/work/shared/specs/golden-format.md).

The writer is deterministic and compact: objects are indented, a list of scalars is written
on one line (so each hidden-state row is one line), floats are written with Python's repr of
the float64 that holds the float32 value exactly (round-trips bit for bit to the f32).
"""

from __future__ import annotations

import json
from typing import Any

from inmotion import jsonfmt

FORMAT = "kin-infer-golden/1"


def dumps(obj: Any, level: int = 0) -> str:
    """The inMotion exporter's compact writer (one implementation), keeping non-ASCII keys."""
    return jsonfmt.dumps(obj, level, ascii_keys=False)


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
