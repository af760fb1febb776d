"""Quantization producers behind one interface: each turns a weight matrix [rows, cols] into
the artifact's codes, scales and zero points (`scale * (u - zero)` in f32, per tensor, channel
or group of columns), so every producer's artifact is the same inmotion-artifact/1 the runtime
reads. `inmotion quantize producers` lists them; an unsupported combination is an error that
says what the producer supports.

- `in-house`: asymmetric min/max affine (quant.quantize_matrix); every width 2..8 and
  granularity.
- `torch-ao`: torchao's affine quantization primitives (`choose_qparams_affine`,
  `quantize_affine`) configured as its weight-only recipes: 8 bits symmetric int8 per channel
  (Int8WeightOnlyConfig: codes -128..127, stored shifted by 128 with zero point 128), other
  widths asymmetric unsigned with integer zero points (Int4WeightOnlyConfig's mapping, per
  group), at any width 2..8 and granularity.
- `hqq`: Half-Quadratic Quantization (the `hqq` package): zero points and scales optimized per
  group of columns (or per channel) by HQQ's solver; 2, 3, 4 and 8 bits (a row's last,
  narrower group is solved as its own group, as the artifact lays it out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import quant


@dataclass(frozen=True)
class Producer:
    name: str
    summary: str
    #: None when supported, else why not.
    check: Callable[[int, str, int, int], Optional[str]]
    matrix: Callable[[np.ndarray, int, str, int], tuple]
    #: The Python module it needs (None: nothing beyond numpy).
    needs: Optional[str]
    version: Callable[[], str]


def _always(bits, granularity, group_size, cols):
    return None


def _torchao_matrix(w, bits, granularity, group_size):
    import torch
    from torchao.quantization.quant_primitives import (MappingType, choose_qparams_affine,
                                                       quantize_affine)
    w = np.asarray(w, np.float32)
    rows, cols = w.shape
    G = quant.n_groups(cols, granularity, group_size)
    symmetric = bits == 8
    if symmetric:
        qmin, qmax, dtype, mapping = -128, 127, torch.int8, MappingType.SYMMETRIC
    else:
        qmin, qmax, dtype, mapping = 0, (1 << bits) - 1, torch.uint8, MappingType.ASYMMETRIC
    u = np.empty((rows, cols), np.uint8)
    scale = np.empty((rows, G), np.float32)
    zero = np.empty((rows, G), np.float32)
    t = torch.from_numpy(w)
    if granularity == "per_tensor":
        spans = [(0, cols, None)]
    elif granularity == "per_channel":
        spans = [(0, cols, 0)]
    else:
        spans = [(g * group_size, min(cols, (g + 1) * group_size), g) for g in range(G)]
    for lo, hi, g in spans:
        blk = t[:, lo:hi].contiguous()
        block = blk.shape if g is None else (1, hi - lo)
        s, zp = choose_qparams_affine(blk, mapping, block, dtype, qmin, qmax,
                                      eps=torch.finfo(torch.float32).eps, scale_dtype=torch.float32,
                                      zero_point_dtype=torch.int32)
        q = quantize_affine(blk, block, s, zp, dtype, qmin, qmax)
        q = q.to(torch.int32).numpy()
        s = s.to(torch.float32).reshape(-1).numpy()
        zp = zp.to(torch.int32).reshape(-1).numpy() if zp is not None else np.zeros_like(s, np.int32)
        shift = 128 if symmetric else 0
        u[:, lo:hi] = (q + shift).astype(np.uint8)
        col = 0 if g is None else g
        scale[:, col] = s if s.size == rows else s[0]
        zero[:, col] = ((zp + shift) if zp.size == rows else np.full(rows, zp[0] + shift)).astype(np.float32)
    if granularity == "per_tensor":
        scale[:] = scale[:, :1]
        zero[:] = zero[:, :1]
    return u, scale, zero


def _hqq_check(bits, granularity, group_size, cols):
    if bits not in (2, 3, 4, 8):
        return f"hqq quantizes to 2, 3, 4 or 8 bits, not {bits}"
    if granularity == "per_tensor":
        return "hqq quantizes per channel or per group, not per tensor"
    return None


def _hqq_matrix(w, bits, granularity, group_size):
    import torch
    from hqq.core.quantize import Quantizer
    w = np.asarray(w, np.float32)
    rows, cols = w.shape
    gs = cols if granularity == "per_channel" else min(group_size, cols)

    def run(block, g):
        # HQQ groups `g` consecutive values of a row (axis=1): the artifact's per-group layout.
        Wq, meta = Quantizer.quantize(torch.from_numpy(np.ascontiguousarray(block)), nbits=bits,
                                      channel_wise=True, group_size=g, optimize=True, round_zero=False,
                                      axis=1, bitpack=False, compute_dtype=torch.float32, device="cpu")
        n = block.shape[1] // g
        u = Wq.reshape(rows, block.shape[1]).round().clamp(0, (1 << bits) - 1).to(torch.uint8).numpy()
        return (u, meta["scale"].to(torch.float32).reshape(rows, n).numpy(),
                meta["zero"].to(torch.float32).reshape(rows, n).numpy())

    full = (cols // gs) * gs
    parts = [run(w[:, :full], gs)]
    if full < cols:  # the artifact's last group is narrower: HQQ solves it as its own group
        parts.append(run(w[:, full:], cols - full))
    return tuple(np.concatenate([p[i] for p in parts], axis=1) for i in range(3))


def _version(module):
    def v():
        try:
            m = __import__(module)
        except ImportError:
            return "not installed"
        return getattr(m, "__version__", "installed")
    return v


PRODUCERS = {
    "in-house": Producer("in-house", "asymmetric min/max affine; bits 2..8; per_tensor, per_channel, "
                         "per_group; fp16/bf16 casts", _always, quant.quantize_matrix, None,
                         lambda: "built in"),
    "torch-ao": Producer("torch-ao", "torchao affine primitives as its weight-only recipes: 8 bits "
                         "symmetric (int8 weight-only), 2..7 bits asymmetric (int4 weight-only's "
                         "mapping); every granularity", _always, _torchao_matrix, "torchao",
                         _version("torchao")),
    "hqq": Producer("hqq", "Half-Quadratic Quantization (optimized zero/scale); 2, 3, 4, 8 bits; "
                    "per_channel, per_group", _hqq_check, _hqq_matrix,
                    "hqq", _version("hqq")),
}


def get(name: str) -> Producer:
    try:
        return PRODUCERS[name]
    except KeyError:
        raise ValueError(f"unknown producer `{name}` (expected one of: {', '.join(PRODUCERS)})") from None


def table() -> str:
    lines = []
    for p in PRODUCERS.values():
        lines.append(f"{p.name:9}  {p.summary}\n{'':9}  ({p.version()})")
    return "\n".join(lines)


def require(producer: Producer, scheme: quant.Scheme, cols: int, tensor: str):
    """Raises ValueError when `producer` cannot make `scheme` for a `cols`-column tensor."""
    if producer.needs and not scheme.is_cast:
        try:
            __import__(producer.needs)
        except ImportError as e:
            raise ValueError(f"producer `{producer.name}` needs the `{producer.needs}` package "
                             f"(pip install -r python/inmotion-lock.txt): {e}") from None
    if scheme.is_cast:
        return  # a cast is the same for every producer (the in-house one makes it)
    why = producer.check(scheme.bits, scheme.granularity, scheme.group_size, cols)
    if why:
        raise ValueError(f"producer `{producer.name}` cannot make {scheme.name} for {tensor}: {why}")
