"""Quantization schemes of inmotion-artifact/1 (numpy only; no torch needed).

Asymmetric min/max affine quantization: for each group of weights (a whole tensor, a row,
or `group_size` consecutive columns of a row), with lo = min and hi = max of the group,
    scale = (hi - lo) / (2**bits - 1)        (1.0 when hi == lo)
    zero  = -lo / scale                      (a float32 zero point, stored)
    u     = clip(round(w / scale + zero), 0, 2**bits - 1)
and the runtime dequantizes in f32 as `scale * (u - zero)`.

Codes are packed little-endian, LSB-first, row by row (each row starts on a byte boundary):
code i of a row occupies bits [i*bits, (i+1)*bits) of the row's bit string, bit k of the string
being bit (k % 8) of byte k // 8.
"""

from __future__ import annotations

import math
import re

import numpy as np

DEFAULT_GROUP = 32

# label -> (bits, granularity, group_size); fp32/fp16/bf16 are casts (bits None)
PRESETS = {
    "fp32": (None, None, 0),
    "fp16": (None, None, 0),
    "bf16": (None, None, 0),
    "int8": (8, "per_channel", 0),
    "int8_pc": (8, "per_channel", 0),
    "int8_pt": (8, "per_tensor", 0),
    "q8": (8, "per_group", DEFAULT_GROUP),
    "q6": (6, "per_group", DEFAULT_GROUP),
    "q5": (5, "per_group", DEFAULT_GROUP),
    "q4": (4, "per_group", DEFAULT_GROUP),
    "q3": (3, "per_group", DEFAULT_GROUP),
    "q2": (2, "per_group", DEFAULT_GROUP),
}

GRAMMAR = [
    ("q{bits}_pg{group}", "bits 2..8, per group of `group` columns (e.g. q4_pg128, q3_pg7)"),
    ("q{bits}_pc", "bits 2..8, per channel (one scale/zero per output row)"),
    ("q{bits}_pt", "bits 2..8, per tensor (one scale/zero for the whole tensor, repeated on every row)"),
    ("q{bits}", "bits 2..8, per group of 32 columns (q7 too, though not a listed preset)"),
]


class Scheme:
    def __init__(self, name, bits, granularity, group_size):
        self.name = name
        self.bits = bits
        self.granularity = granularity
        self.group_size = group_size

    @property
    def is_cast(self):
        return self.bits is None

    def __repr__(self):
        return f"Scheme({self.name!r}, bits={self.bits}, {self.granularity}, group={self.group_size})"


def parse_scheme(name: str) -> Scheme:
    if name in PRESETS:
        b, g, gs = PRESETS[name]
        return Scheme(name, b, g, gs)
    m = re.fullmatch(r"q([2-8])(?:_(pg)(\d+)|_(pc)|_(pt))?", name)
    if not m:
        raise ValueError(f"unknown quantization format {name!r} (see `inmotion quantize formats`)")
    bits = int(m.group(1))
    if m.group(2):
        gs = int(m.group(3))
        if gs < 1:
            raise ValueError(f"{name}: group size must be >= 1")
        return Scheme(name, bits, "per_group", gs)
    if m.group(4):
        return Scheme(name, bits, "per_channel", 0)
    if m.group(5):
        return Scheme(name, bits, "per_tensor", 0)
    return Scheme(name, bits, "per_group", DEFAULT_GROUP)


def n_groups(cols: int, granularity: str, group_size: int) -> int:
    if granularity == "per_group":
        return -(-cols // group_size)
    return 1


def bytes_per_row(cols: int, bits: int) -> int:
    return -(-cols * bits // 8)


def pack_codes(u: np.ndarray, bits: int) -> np.ndarray:
    """u: [rows, cols] integer codes < 2**bits -> U8 [rows, ceil(cols*bits/8)]."""
    u = np.asarray(u, dtype=np.uint16)
    rows, cols = u.shape
    assert int(u.max(initial=0)) < (1 << bits)
    bitarr = ((u[:, :, None] >> np.arange(bits, dtype=np.uint16)) & 1).astype(np.uint8)
    bitarr = bitarr.reshape(rows, cols * bits)
    nb = bytes_per_row(cols, bits)
    pad = nb * 8 - cols * bits
    if pad:
        bitarr = np.concatenate([bitarr, np.zeros((rows, pad), np.uint8)], axis=1)
    return np.packbits(bitarr, axis=1, bitorder="little").reshape(rows, nb)


def unpack_codes(q: np.ndarray, bits: int, cols: int) -> np.ndarray:
    q = np.asarray(q, dtype=np.uint8)
    rows = q.shape[0]
    bitarr = np.unpackbits(q, axis=1, bitorder="little")[:, : cols * bits].reshape(rows, cols, bits)
    return (bitarr.astype(np.uint16) << np.arange(bits, dtype=np.uint16)).sum(axis=2).astype(np.uint8)


def _affine(lo: np.ndarray, hi: np.ndarray, bits: int):
    qmax = (1 << bits) - 1
    lo = lo.astype(np.float64)
    hi = hi.astype(np.float64)
    span = hi - lo
    scale = np.where(span > 0, span / qmax, 1.0).astype(np.float32)
    zero = (-lo / scale.astype(np.float64)).astype(np.float32)
    return scale, zero


def quantize_matrix(w: np.ndarray, bits: int, granularity: str, group_size: int):
    """w: float [rows, cols] -> (codes u8 [rows, cols], scale f32 [rows, G], zero f32 [rows, G])."""
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    qmax = (1 << bits) - 1
    G = n_groups(cols, granularity, group_size)
    if granularity == "per_tensor":
        s, z = _affine(np.array([w.min()]), np.array([w.max()]), bits)
        scale = np.full((rows, 1), s[0], np.float32)
        zero = np.full((rows, 1), z[0], np.float32)
    elif granularity == "per_channel":
        scale, zero = _affine(w.min(axis=1), w.max(axis=1), bits)
        scale, zero = scale[:, None], zero[:, None]
    elif granularity == "per_group":
        lo = np.empty((rows, G)); hi = np.empty((rows, G))
        for g in range(G):
            blk = w[:, g * group_size:(g + 1) * group_size]
            lo[:, g] = blk.min(axis=1); hi[:, g] = blk.max(axis=1)
        scale, zero = _affine(lo, hi, bits)
    else:
        raise ValueError(f"granularity {granularity!r}")
    gi = np.minimum(np.arange(cols) // group_size, G - 1) if granularity == "per_group" else np.zeros(cols, int)
    s_full = scale[:, gi].astype(np.float64)
    z_full = zero[:, gi].astype(np.float64)
    u = np.clip(np.rint(w.astype(np.float64) / s_full + z_full), 0, qmax).astype(np.uint8)
    return u, scale.astype(np.float32), zero.astype(np.float32)


def dequantize_matrix(u, scale, zero, granularity: str, group_size: int) -> np.ndarray:
    """The runtime's arithmetic, in f32: scale[r][g] * (u[r][c] - zero[r][g])."""
    u = np.asarray(u)
    rows, cols = u.shape
    G = scale.shape[1]
    gi = (np.arange(cols) // group_size) if granularity == "per_group" else np.zeros(cols, int)
    assert gi.max(initial=0) < G
    s = scale.astype(np.float32)[:, gi]
    z = zero.astype(np.float32)[:, gi]
    return (s * (u.astype(np.float32) - z)).astype(np.float32)


def quantize_tensor(w: np.ndarray, scheme: Scheme, matrix=None):
    """Any Linear [out, in] / Conv [out, in, k] weight -> dict of the three stored arrays and the
    dequantized weight (same shape as w). `matrix`: the producer's quantizer (default the
    in-house one), (w [rows, cols], bits, granularity, group_size) -> (u, scale, zero)."""
    shape = w.shape
    m = np.asarray(w, np.float32).reshape(shape[0], int(np.prod(shape[1:])))
    u, scale, zero = (matrix or quantize_matrix)(m, scheme.bits, scheme.granularity, scheme.group_size)
    qmax = (1 << scheme.bits) - 1
    G = n_groups(m.shape[1], scheme.granularity, scheme.group_size)
    if (u.shape != m.shape or u.dtype != np.uint8 or int(u.max(initial=0)) > qmax
            or scale.shape != (m.shape[0], G) or zero.shape != (m.shape[0], G)
            or not (np.isfinite(scale).all() and np.isfinite(zero).all())):
        raise ValueError(f"the producer returned codes/scales that do not fit {scheme.name} "
                         f"(codes {u.shape} {u.dtype} max {int(u.max(initial=0))}, scale {scale.shape}, "
                         f"zero {zero.shape})")
    deq = dequantize_matrix(u, scale, zero, scheme.granularity, scheme.group_size).reshape(shape)
    return {"q": pack_codes(u, scheme.bits), "scale": scale, "zero": zero}, deq


def dequantize_stored(q, scale, zero, bits, granularity, group_size, shape):
    rows = shape[0]
    cols = int(np.prod(shape[1:]))
    u = unpack_codes(q, bits, cols)
    return dequantize_matrix(u, scale, zero, granularity, group_size).reshape(shape)


def formats_table():
    lines = [f"{'format':<10} {'bits':>4}  {'granularity':<12} {'group':>5}  stored"]
    for name, (b, g, gs) in PRESETS.items():
        if b is None:
            stored = {"fp32": "F32", "fp16": "F16 (every float tensor)", "bf16": "BF16 (every float tensor)"}[name]
            lines.append(f"{name:<10} {'-':>4}  {'cast':<12} {'-':>5}  {stored}")
        else:
            lines.append(f"{name:<10} {b:>4}  {g:<12} {gs if g == 'per_group' else '-':>5}  U8 codes + F32 scale/zero")
    lines.append("")
    lines.append("grammar:")
    for pat, desc in GRAMMAR:
        lines.append(f"  {pat:<18} {desc}")
    return "\n".join(lines)
