"""Window geometry and numpy/BLAS implementations of convolution and pooling (N-D, NCHW).

Conv is im2col over a strided view of the padded input followed by one batched matmul per
block of output rows (so the column matrix stays cache-sized); depthwise convs accumulate
one tap at a time instead (a matmul with K = 9 wastes BLAS). Pools combine shifted strided
slices tap by tap, which is faster than reducing a 6-D window view.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

_COLS_BUDGET = 1 << 21  # float32 elements per im2col block (8 MiB)


@dataclass(frozen=True)
class Window:
    """Sliding-window geometry for ``spatial`` input dims: begin/end pads include the extra
    end padding ceil_mode needs; ``out`` is the output spatial shape."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]  # declared end pads
    extra: tuple[int, ...]  # ceil_mode padding past the declared pads
    out: tuple[int, ...]

    @property
    def taps(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.kernel)))

    def tap_slices(self, tap: Sequence[int]) -> tuple[slice, ...]:
        """Slices of the padded input holding the elements tap ``tap`` reads for every output."""
        return tuple(
            slice(t * d, t * d + s * (o - 1) + 1, s)
            for t, d, s, o in zip(tap, self.dilations, self.strides, self.out)
        )


def window(
    spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
) -> Window:
    """ONNX Conv/Pool output-size rules (auto_pad SAME_UPPER/SAME_LOWER/VALID, ceil_mode)."""
    rank = len(spatial)
    strides = tuple(strides or [1] * rank)
    dilations = tuple(dilations or [1] * rank)
    kernel = tuple(kernel)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / s) for i, s in zip(spatial, strides)]
        total = [max(0, (o - 1) * s + w - i) for o, s, w, i in zip(out, strides, span, spatial)]
        small = [t // 2 for t in total]
        big = [t - h for t, h in zip(total, small)]
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad == "VALID":
        begin = end = [0] * rank
    else:
        p = list(pads or [0] * (2 * rank))
        begin, end = p[:rank], p[rank:]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = out
    else:
        rnd = math.ceil if ceil_mode else math.floor
        out_shape = []
        for i, b, e, w, s in zip(spatial, begin, end, span, strides):
            o = int(rnd((i + b + e - w) / s)) + 1
            if ceil_mode and (o - 1) * s >= i + b:  # a window must start inside input/begin pad
                o -= 1
            out_shape.append(o)
    extra = [
        max(0, (o - 1) * s + w - (i + b + e))
        for o, s, w, i, b, e in zip(out_shape, strides, span, spatial, begin, end)
    ]
    return Window(
        kernel, strides, dilations, tuple(begin), tuple(end), tuple(extra), tuple(out_shape)
    )


_local = threading.local()


def scratch(slot: str, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A reusable per-thread work array (contents undefined), grown on demand: padded
    inputs and column matrices are rebuilt every call, so allocating them is wasted time."""
    pool: dict[str, np.ndarray] = _local.__dict__.setdefault("pool", {})
    size = math.prod(shape)
    flat = pool.get(slot)
    if flat is None or flat.dtype != dtype or flat.size < size:
        flat = pool[slot] = np.empty(max(size, 1), dtype)
    return flat[:size].reshape(tuple(shape))


def padded(x: np.ndarray, win: Window, fill: float) -> np.ndarray:
    """``x`` (N, C, *spatial) inside a border of ``fill`` (pads plus ceil_mode extra)."""
    if not any(win.begin) and not any(win.end) and not any(win.extra):
        return x
    lo, hi = win.begin, tuple(e + x_ for e, x_ in zip(win.end, win.extra))
    shape = x.shape[:2] + tuple(i + b + e for i, b, e in zip(x.shape[2:], lo, hi))
    out = scratch("padded", shape, x.dtype)
    lead = (slice(None), slice(None))
    for axis, (b, e) in enumerate(zip(lo, hi)):  # only the border is filled
        before = [slice(None)] * len(lo)
        if b:
            before[axis] = slice(0, b)
            out[(*lead, *before)] = fill
        if e:
            before[axis] = slice(shape[2 + axis] - e, None)
            out[(*lead, *before)] = fill
    out[(*lead, *(slice(b, b + i) for b, i in zip(lo, x.shape[2:])))] = x
    return out


def conv(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, win: Window, group: int, out: np.ndarray
) -> None:
    """ONNX Conv (float32) written into ``out`` (N, M, *win.out)."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    xp = padded(x, win, 0.0)
    rank = len(win.kernel)
    pointwise = all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
    if pointwise and not any(win.begin) and not any(win.end) and group == 1:
        np.matmul(w.reshape(m, c), xp.reshape(n, c, -1), out=out.reshape(n, m, -1))
    elif cg == 1 and mg == 1:
        _depthwise(xp, w, win, out)
    else:
        _im2col(xp, w.reshape(group, mg, -1), win, group, out)
    if b is not None:
        out += b.reshape((m,) + (1,) * rank)


def _depthwise(xp: np.ndarray, w: np.ndarray, win: Window, out: np.ndarray) -> None:
    channel = (slice(None), slice(None))
    bcast = (1, w.shape[0]) + (1,) * len(win.kernel)
    tmp = scratch("taps", out.shape, out.dtype)
    for i, tap in enumerate(win.taps):
        wt = w.reshape(w.shape[0], -1)[:, i].reshape(bcast)
        src = xp[channel + win.tap_slices(tap)]
        if i == 0:
            np.multiply(src, wt, out=out)
        else:
            np.multiply(src, wt, out=tmp)
            out += tmp


def _im2col(xp: np.ndarray, wg: np.ndarray, win: Window, group: int, out: np.ndarray) -> None:
    n, c = xp.shape[:2]
    cg = c // group
    rank = len(win.kernel)
    sp = xp.strides[2:]
    # View (N, G, Cg, *kernel, *out) over the padded input: no copy until reshape.
    view = as_strided(
        xp,
        shape=(n, group, cg, *win.kernel, *win.out),
        strides=(
            xp.strides[0],
            cg * xp.strides[1],
            xp.strides[1],
            *(s * d for s, d in zip(sp, win.dilations)),
            *(s * t for s, t in zip(sp, win.strides)),
        ),
        writeable=False,
    )
    k = wg.shape[2]
    per_row = math.prod(win.out[1:])
    rows = max(1, min(win.out[0], _COLS_BUDGET // max(1, group * k * per_row)))
    flat = out.reshape(n, group, wg.shape[1], -1)
    lead = (slice(None),) * (2 + rank)  # group, channel, kernel axes
    for i in range(n):
        for r0 in range(0, win.out[0], rows):
            r1 = min(win.out[0], r0 + rows)
            block = view[i][(*lead, slice(r0, r1))]
            cols = scratch("cols", block.shape, xp.dtype)
            np.copyto(cols, block)
            cols = cols.reshape(group, k, -1)
            np.matmul(wg, cols, out=flat[i, :, :, r0 * per_row : r1 * per_row])


def max_pool(x: np.ndarray, win: Window, out: np.ndarray) -> None:
    xp = padded(x, win, -np.inf)
    lead = (slice(None), slice(None))
    for i, tap in enumerate(win.taps):
        src = xp[lead + win.tap_slices(tap)]
        if i == 0:
            out[...] = src
        else:
            np.maximum(out, src, out=out)


def avg_pool(x: np.ndarray, win: Window, counts: np.ndarray, out: np.ndarray) -> None:
    """Sum over taps divided by ``counts`` (see ``pool_counts``)."""
    xp = padded(x, win, 0.0)
    lead = (slice(None), slice(None))
    for i, tap in enumerate(win.taps):
        src = xp[lead + win.tap_slices(tap)]
        if i == 0:
            out[...] = src
        else:
            out += src
    out /= counts


def pool_counts(spatial: Sequence[int], win: Window, count_include_pad: bool) -> np.ndarray:
    """How many elements each output window averages (spatial shape, float32): real inputs,
    plus declared pads when ``count_include_pad``, never the ceil_mode extra."""
    inner = np.ones(tuple(spatial), np.float32)
    if count_include_pad:
        inner = np.pad(inner, [(b, e) for b, e in zip(win.begin, win.end)], constant_values=1)
        mask = np.pad(inner, [(0, x) for x in win.extra])
    else:
        mask = np.pad(inner, [(b, e + x) for b, e, x in zip(win.begin, win.end, win.extra)])
    counts = np.zeros(win.out, np.float32)
    for tap in win.taps:
        counts += mask[win.tap_slices(tap)]
    return np.maximum(counts, 1.0)
