"""What the quantisation ops share: integer ranges, parameter layouts and kernel helpers."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import SpawnMLError, UnsupportedOpError
from spawnml.kernel import cast, f32, helper, static_range
from spawnml.op import Data, Node, OpDef, TensorInfo

QRANGES: dict[DType, tuple[int, int]] = {
    DType.uint8: (0, 255),
    DType.int8: (-128, 127),
    DType.uint16: (0, 65535),
    DType.int16: (-32768, 32767),
}
"""Saturation bounds of the integer types spawnml quantises to."""

ZERO = np.zeros(1, np.int32)
"""Stands in for an omitted zero point (a kernel reads element 0 of it)."""


def quant_dtype(node: Node, code: int) -> DType:
    """The DType of an ONNX element-type code used as a quantised type."""
    try:
        dt = as_dtype(int(code))
    except SpawnMLError:
        raise UnsupportedOpError(
            f"{node.describe()}: quantised type code {code} (float8/int4/...) is not supported"
        ) from None
    if dt not in QRANGES and dt is not DType.int32:
        raise UnsupportedOpError(f"{node.describe()}: quantised type {dt} is not supported")
    return dt


def saturate_round(v: np.ndarray, dt: DType) -> np.ndarray:
    """Round half to even and saturate to ``dt``; NaN maps to the lowest value."""
    lo, hi = QRANGES[dt]
    r = np.clip(np.rint(np.asarray(v, np.float64)), lo, hi)
    return np.where(np.isnan(r), lo, r).astype(dt.numpy)


def check_scalar_or_vector(op: OpDef, node: Node, info: TensorInfo | None, what: str,
                           length: int | str | None) -> None:
    """A scale/zero-point that is per-tensor (one element) or a vector of ``length``."""
    if info is None or info.shape is None:
        return
    shape = tuple(info.shape)
    if len(shape) == 0 or (len(shape) == 1 and shape[0] in (1, length, None)):
        return
    if all(d == 1 for d in shape):
        return
    raise op.fail(node, f"{what} must be a scalar or a vector of {length}, got shape {shape}")


def zero_or(ref):
    """The reference of an optional zero point, or a constant zero."""
    return ref if ref is not None else Data(ZERO)


@helper
def param_offset(p, out, axis, block):
    """Flat offset of the scale/zero-point element for this output element: per-tensor
    (one element), per-axis (a vector along ``axis``) or blocked (``block`` > 0: p has the
    output's rank, ``axis`` divided into blocks)."""
    off = 0
    if p.size == 1:
        off = 0
    elif block == 0:
        off = out.index[axis]
    else:
        for d in static_range(p.ndim):
            if d == axis:
                off = off + (out.index[d] // block) * p.strides[d]
            else:
                off = off + out.index[d] * p.strides[d]
    return off


@helper
def saturate(v, lo, hi):
    """Round half to even and clamp to [lo, hi] (f32); NaN saturates to ``lo``."""
    r = min(max(round(v), lo), hi)
    return lo if isnan(r) else r


@helper
def requant_scale(sa, sb, sy):
    """The requantisation multiplier, in the order onnx computes it."""
    return cast(sa, f32) * cast(sb, f32) / cast(sy, f32)
