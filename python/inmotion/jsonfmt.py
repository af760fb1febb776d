"""Deterministic compact JSON: objects indented, lists of scalars on one line, floats as repr
(round-trip exact; f32 values are written as the float64 that holds them exactly)."""

from __future__ import annotations

import json
import math


def _scalar(x):
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"non-finite value {x!r}")
        return repr(x)
    return json.dumps(x, ensure_ascii=False)


def dumps(obj, level=0, ascii_keys=True):
    """`ascii_keys=False` keeps non-ASCII keys as UTF-8 (the engine's golden files,
    python/golden_json.py); the artifact files escape them, as they always have."""
    pad = "  " * level
    inner = "  " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=ascii_keys)}: {dumps(v, level + 1, ascii_keys)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "[]"
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return "[" + ", ".join(_scalar(v) for v in obj) + "]"
        return "[\n" + ",\n".join(inner + dumps(v, level + 1, ascii_keys) for v in obj) + "\n" + pad + "]"
    return _scalar(obj)


def write(path, obj):
    text = dumps(obj) + "\n"
    json.loads(text)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
