"""The inMotion time-series classifiers (lejepa, t_jepa, ts_jepa, cf_jepa, sigreg) from the
artifacts the Python exporter writes, on the same runtime as ``inmotion-infer``.

    from kin_infer import inmotion
    m = inmotion.Model("artifacts/lejepa")
    probs = m.classify(windows)            # [n, seq_len, in_channels] -> [n, num_classes]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from . import _native
from .errors import InvalidInputError

__all__ = ["Model", "CheckReport"]


@dataclass
class CheckReport:
    """The result of replaying a golden file (as ``inmotion-infer check``)."""

    passed: bool
    cases: int
    max_abs_diff: float
    tolerance: float
    #: (case, logit position, expected, actual) of each value outside the tolerance.
    mismatches: List[Tuple[int, int, float, float]]


class Model:
    """An inMotion artifact directory (``meta.json`` + ``model.safetensors``)."""

    def __init__(self, artifact_dir: str) -> None:
        self._native = _native.Model(str(artifact_dir))

    def _run(self, windows: np.ndarray, raw: bool) -> Tuple[np.ndarray, np.ndarray]:
        a = np.asarray(windows)
        if a.dtype.kind not in "fiu":
            raise InvalidInputError(f"windows must be numbers, not {a.dtype}")
        want = (self.seq_len,) if raw else (self.seq_len, self.in_channels)
        if a.shape == want:
            a = a[None]
        if a.ndim != len(want) + 1 or tuple(a.shape[1:]) != want:
            shape = ", ".join(str(d) for d in want)
            raise InvalidInputError(
                f"windows must have shape [n, {shape}] (or [{shape}] for one), not {list(a.shape)}"
            )
        n = a.shape[0]
        data = np.ascontiguousarray(a, dtype=np.float32)
        probs, logits = self._native.classify(data.tobytes(), n, raw)
        k = self.num_classes
        return (np.frombuffer(probs, dtype=np.float32).reshape(n, k),
                np.frombuffer(logits, dtype=np.float32).reshape(n, k))

    def classify(self, windows: np.ndarray, *, raw: bool = False) -> np.ndarray:
        """Class probabilities (softmax), float32 ``[n, num_classes]``, of windows shaped
        ``[n, seq_len, in_channels]`` (or raw readings ``[n, seq_len]`` with ``raw=True``,
        preprocessed as the artifact declares). Equal to ``inmotion-infer predict``'s."""
        return self._run(windows, raw)[0]

    def logits(self, windows: np.ndarray, *, raw: bool = False) -> np.ndarray:
        """The logits of :meth:`classify`."""
        return self._run(windows, raw)[1]

    def predict(self, windows: np.ndarray, *, raw: bool = False) -> np.ndarray:
        """The most likely class of each window (first on ties), int64 ``[n]``."""
        return np.argmax(self.classify(windows, raw=raw), axis=1)

    def check(self, golden: str) -> CheckReport:
        """Replays a golden file (or ``DIR/golden.json``) against this model."""
        r = self._native.check(str(golden))
        return CheckReport(**r)

    @property
    def seq_len(self) -> int:
        return self._native.seq_len

    @property
    def in_channels(self) -> int:
        return self._native.in_channels

    @property
    def num_classes(self) -> int:
        return self._native.num_classes

    @property
    def classes(self) -> Optional[List[str]]:
        return self._native.classes

    @property
    def family(self) -> str:
        return self._native.family

    def __repr__(self) -> str:
        return (f"inmotion.Model(family={self.family!r}, seq_len={self.seq_len}, "
                f"in_channels={self.in_channels}, classes={self.num_classes})")
