"""Numpy implementations of MaxPool and AveragePool (N-D, NCHW): the taps of each window are
combined one at a time, which is faster than reducing a 6-D window view. 2-D windows run
separably on the flat grid of fast_taps; other ranks over strided slices of the padded
input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .fast_taps import FlatTaps, flat_taps
from .fast_window import Finish, Window, padded, scratch


def _combine_taps(
    x: np.ndarray,
    win: Window,
    fill: float,
    combine: np.ufunc,
    out: np.ndarray,
    finish: Finish = np.copyto,
) -> None:
    """``finish(out, r)`` where ``r`` is ``combine`` reduced over the taps of ``x`` padded with
    ``fill`` (2-D windows: separably on the flat grid of fast_taps)."""
    if x.ndim == 4:
        taps = flat_taps(x, win, fill)
        finish(out, taps.crop(_separable(taps, combine)))
        return
    xp = padded(x, win, fill)
    lead = (slice(None), slice(None))
    for i, tap in enumerate(win.taps):
        src = xp[lead + win.tap_slices(tap)]
        if i == 0:
            np.copyto(out, src)
        else:
            combine(out, src, out=out)
    if finish is not np.copyto:
        finish(out, out)


def _reduce(combine: np.ufunc, sources: list[np.ndarray], slot: str) -> np.ndarray:
    """``combine`` over ``sources`` (equal-shape views) into a scratch array; a lone source is
    returned as it is."""
    if len(sources) == 1:
        return sources[0]
    acc = scratch(slot, sources[0].shape, sources[0].dtype)
    combine(sources[0], sources[1], out=acc)
    for src in sources[2:]:
        combine(acc, src, out=acc)
    return acc


def _separable(taps: FlatTaps, combine: np.ufunc) -> np.ndarray:
    """Max or sum over a 2-D window as rows then columns: first along x within each row phase
    the taps use (over the output rows plus the rows later taps reach), then along y. A 3x3
    window costs 6 passes instead of 9."""
    win, width = taps.win, taps.width
    (sy, sx), (dy, dx), (kh, kw) = win.strides, win.dilations, win.kernel
    row_shift = [(k * dy) // sy * width for k in range(kh)]
    span = taps.length + max(row_shift)
    rows: dict[int, np.ndarray] = {}
    for py in sorted({(k * dy) % sy for k in range(kh)}):
        sources = []
        for k in range(kw):
            start = (k * dx) // sx
            sources.append(taps.phases[py * sx + (k * dx) % sx, :, :, start : start + span])
        rows[py] = _reduce(combine, sources, f"rows{py}")
    columns = [
        rows[(k * dy) % sy][:, :, shift : shift + taps.length] for k, shift in enumerate(row_shift)
    ]
    return _reduce(combine, columns, "acc")


def max_pool(x: np.ndarray, win: Window, out: np.ndarray) -> None:
    """The max over each window's taps, NaN taps skipped (NaN when every tap inside the
    input is NaN), as the reference."""
    _combine_taps(x, win, -np.inf, np.fmax, out)
    nan = np.isnan(x)
    if not nan.any():
        return
    # fmax against the padding's -inf hides a window whose inside taps are all NaN
    nan_taps = np.empty(out.shape, np.float32)
    _combine_taps(nan.astype(np.float32), win, 0.0, np.add, nan_taps)
    inside = pool_counts(x.shape[2:], win, count_include_pad=False)
    out[(nan_taps == inside) & (inside > 0)] = np.nan


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
