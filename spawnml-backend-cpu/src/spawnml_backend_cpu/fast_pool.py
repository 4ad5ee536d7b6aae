"""Numpy implementations of MaxPool and AveragePool (N-D, NCHW): the taps of each window are
combined one at a time (2-D windows on the flat grid of fast_taps, other ranks over strided
slices of the padded input), which is faster than reducing a 6-D window view."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .fast_taps import flat_taps
from .fast_window import Window, padded


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
