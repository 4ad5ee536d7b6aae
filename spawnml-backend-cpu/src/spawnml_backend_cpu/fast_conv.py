"""Numpy/BLAS implementations of convolution and pooling (N-D, NCHW).

Conv is im2col over a strided view of the padded input followed by one batched matmul per
block of output rows (so the column matrix stays cache-sized); depthwise convs accumulate
one tap at a time instead (a matmul with K = 9 wastes BLAS), as do pools, which is faster
than reducing a 6-D window view. 2-D tap loops read contiguous slices (fast_taps); other
ranks read strided slices of the padded input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .fast_taps import FlatTaps, flat_taps
from .fast_window import Window, padded, scratch

_COLS_BUDGET = 1 << 21  # float32 elements per im2col block (8 MiB)
_DW_MATMUL_LENGTH = 1024  # longest grid row a depthwise conv multiplies through BLAS
_DW_COLS_BUDGET = 1 << 18  # float32 elements per depthwise column block (1 MiB)


def conv(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, win: Window, group: int, out: np.ndarray
) -> None:
    """ONNX Conv (float32) written into ``out`` (N, M, *win.out)."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    rank = len(win.kernel)
    bias = None if b is None else b.reshape((m,) + (1,) * rank)
    pointwise = all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
    if rank == 2 and not (pointwise and group == 1 and not any(win.begin + win.end)):
        taps = flat_taps(x, win, 0.0)
        if cg == 1 and mg == 1:
            _depthwise_flat(taps, w.reshape(m, -1), bias, out)
        else:
            _im2col_flat(taps, w.reshape(group, mg, -1), bias, out)
        return
    xp = padded(x, win, 0.0)
    if pointwise and not any(win.begin) and not any(win.end) and group == 1:
        np.matmul(w.reshape(m, c), xp.reshape(n, c, -1), out=out.reshape(n, m, -1))
    elif cg == 1 and mg == 1:
        _depthwise(xp, w, win, out)
    else:
        _im2col(xp, w.reshape(group, mg, -1), win, group, out)
    if bias is not None:
        out += bias


def _depthwise_flat(
    taps: FlatTaps, wk: np.ndarray, bias: np.ndarray | None, out: np.ndarray
) -> None:
    """Depthwise 2-D conv on the grid; the bias is added in the pass that crops it into
    ``out``. Short grids (small images, many channels) go through BLAS as one (1 x taps) @
    (taps x length) product per channel; long ones accumulate tap by tap, where the column
    matrix would fall out of cache (crossover measured on MobileNetV2's layers)."""
    if taps.length <= _DW_MATMUL_LENGTH:
        acc = _depthwise_matmul(taps, wk)
    else:
        acc = _depthwise_taps(taps, wk)
    if bias is None:
        np.copyto(out, taps.crop(acc))
    else:
        np.add(taps.crop(acc), bias, out=out)


def _depthwise_taps(taps: FlatTaps, wk: np.ndarray) -> np.ndarray:
    acc, tmp = taps.grid("acc"), taps.grid("taps")
    for i, src in enumerate(taps.taps()):
        weight = wk[:, i : i + 1]  # (M, 1) against (N, M, length)
        if i == 0:
            np.multiply(src, weight, out=acc)
        else:
            np.multiply(src, weight, out=tmp)
            acc += tmp
    return acc


def _depthwise_matmul(taps: FlatTaps, wk: np.ndarray) -> np.ndarray:
    acc = taps.grid("acc")
    n, c, length = acc.shape
    k = wk.shape[1]
    step = max(1, _DW_COLS_BUDGET // (k * length))  # channels per cache-sized column block
    sources = list(taps.taps())
    for i in range(n):
        for c0 in range(0, c, step):
            c1 = min(c, c0 + step)
            cols = scratch("cols", (c1 - c0, k, length), acc.dtype)
            for t, src in enumerate(sources):
                cols[:, t] = src[i, c0:c1]
            np.matmul(wk[c0:c1, None, :], cols, out=acc[i, c0:c1, None, :])
    return acc


def _depthwise(xp: np.ndarray, w: np.ndarray, win: Window, out: np.ndarray) -> None:
    """Depthwise conv of any rank over strided tap views of the padded input."""
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


def _im2col_flat(
    taps: FlatTaps, wg: np.ndarray, bias: np.ndarray | None, out: np.ndarray
) -> None:
    """2-D conv as one matmul per block of output rows: the column matrix (Cg * taps, span)
    of each group is filled by one contiguous-row copy per tap, the product lands on the
    grid and the bias is added in the pass that crops it into ``out``."""
    n, c = taps.phases.shape[1:3]
    group, mg, k = wg.shape
    cg = c // group
    ntaps = k // cg
    (ho, wo), width = taps.win.out, taps.width
    rows = max(1, min(ho, _COLS_BUDGET // max(1, c * ntaps * width)))
    sources = list(taps.taps())
    for i in range(n):
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            begin, span = r0 * width, (r1 - r0) * width
            cols = scratch("cols", (group, cg, ntaps, span), taps.phases.dtype)
            for t, src in enumerate(sources):
                cols[:, :, t] = src[i, :, begin : begin + span].reshape(group, cg, span)
            grid = scratch("grid", (group, mg, span), taps.phases.dtype)
            np.matmul(wg, cols.reshape(group, k, span), out=grid)
            result = grid.reshape(group * mg, r1 - r0, width)[..., :wo]
            if bias is None:
                np.copyto(out[i, :, r0:r1], result)
            else:
                np.add(result, bias, out=out[i, :, r0:r1])


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


def _combine_taps(
    x: np.ndarray,
    win: Window,
    fill: float,
    combine: np.ufunc,
    out: np.ndarray,
    finish: Callable[[np.ndarray, np.ndarray], object] = np.copyto,
) -> None:
    """``finish(out, r)`` where ``r`` is ``combine`` reduced over the taps of ``x`` padded with
    ``fill`` (2-D windows work on a flat grid, see fast_taps)."""
    if x.ndim == 4:
        taps = flat_taps(x, win, fill)
        acc, sources = taps.grid("acc"), taps.taps()
    else:
        xp = padded(x, win, fill)
        lead = (slice(None), slice(None))
        acc, sources = out, (xp[lead + win.tap_slices(tap)] for tap in win.taps)
    for i, src in enumerate(sources):
        if i == 0:
            np.copyto(acc, src)
        else:
            combine(acc, src, out=acc)
    if x.ndim == 4:
        finish(out, taps.crop(acc))
    elif finish is not np.copyto:
        finish(out, acc)


def max_pool(x: np.ndarray, win: Window, out: np.ndarray) -> None:
    _combine_taps(x, win, -np.inf, np.maximum, out)


def avg_pool(x: np.ndarray, win: Window, counts: np.ndarray, out: np.ndarray) -> None:
    """Sum over taps divided by ``counts`` (see ``pool_counts``)."""
    _combine_taps(x, win, 0.0, np.add, out, lambda part, r: np.divide(r, counts, out=part))


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
