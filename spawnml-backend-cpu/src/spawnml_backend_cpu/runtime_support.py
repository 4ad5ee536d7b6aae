"""Functions the generated numpy code calls (kept out of the generated source for clarity)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

Range = tuple[int, int, int]  # (start, count, step) of one grid or loop axis


def take(buf: np.ndarray, index: np.ndarray | np.integer) -> np.ndarray:
    """Gather; indices of masked-off lanes may be out of range, so they are clipped."""
    return np.take(buf, index, mode="clip")


def affine_load(
    buf: np.ndarray, const: int, terms: Sequence[tuple[int, int]], ranges: Sequence[Range]
) -> np.ndarray:
    """``buf[const + sum(coeff * value(axis))]`` over the grid, as a strided view when the
    whole box is in bounds (no copy), else as a clipped gather."""
    const = int(const)
    ndim = len(ranges)
    shape = [1] * ndim
    strides = [0] * ndim
    lo = hi = const
    for axis, coeff in terms:
        start, count, step = ranges[axis]
        shape[axis] = count
        base = coeff * start
        strides[axis] = coeff * step
        last = base + strides[axis] * (count - 1)
        lo += min(base, last)
        hi += max(base, last)
        const += base
    size = buf.shape[0]
    if 0 <= lo and hi < size and all(s >= 0 for s in strides) and 0 not in shape:
        item = buf.itemsize
        return as_strided(
            buf[const:],
            shape=tuple(shape),
            strides=tuple(s * item for s in strides),
            writeable=False,
        )
    index = np.full((1,) * ndim, const, dtype=np.int64)
    for axis, _ in terms:
        idx_shape = [1] * ndim
        idx_shape[axis] = shape[axis]
        index = index + (np.arange(shape[axis], dtype=np.int64) * strides[axis]).reshape(idx_shape)
    return np.take(buf, index, mode="clip")


def expand(v: object, k: int) -> object:
    """Add ``k`` trailing axes to a lane array so it broadcasts against loop axes."""
    if isinstance(v, np.ndarray) and v.ndim:
        return v.reshape(v.shape + (1,) * k)
    return v


def convert(x: object, dt: np.dtype) -> object:
    if isinstance(x, np.ndarray):
        return x.astype(dt)
    return dt.type(x)


def bitcast(x: object, dt: np.dtype) -> object:
    if isinstance(x, np.ndarray):
        return x.view(dt)
    return np.asarray(x).view(dt)[()]


def truncdiv(a: object, b: object) -> object:
    """C-style integer division; x / 0 == 0."""
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    return np.where((r != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0)), q + 1, q).astype(
        np.result_type(a, b)
    )


def truncmod(a: object, b: object) -> object:
    """C-style integer remainder (sign of the dividend); x % 0 == 0."""
    return np.fmod(a, b)


def loop_axis(start: int, count: int, step: int, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = count
    return (start + step * np.arange(count, dtype=np.int32)).reshape(shape).astype(np.int32)


def reduce_loops(
    fn, value: object, lanes: int, loop_shape: tuple[int, ...], dt: np.dtype, identity: object
) -> np.ndarray:
    """Reduce a vectorised loop nest's values over its loop axes.

    Lane axes are not broadcast: a value that does not depend on some output axis is
    reduced once and broadcast afterwards (a fused softmax's row max costs O(row), not
    O(row x columns))."""
    value = np.asarray(value)
    lead = value.shape[:lanes] if value.ndim >= lanes else (1,) * lanes
    target = np.broadcast_shapes(value.shape, lead + loop_shape)
    axes = tuple(range(lanes, lanes + len(loop_shape)))
    full = np.broadcast_to(value, target)
    if fn is np.sum or fn is np.prod:
        return fn(full, axis=axes, dtype=dt)
    return fn(full, axis=axes, initial=identity)
