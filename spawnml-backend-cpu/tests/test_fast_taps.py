"""2-D tap loops on the flat, phase-split grid (fast_taps) against a float64 tap-by-tap
reference over every stride/dilation/kernel/padding combination that changes the layout."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from spawnml_backend_cpu import fast_conv, fast_pool
from spawnml_backend_cpu.fast_taps import flat_taps
from spawnml_backend_cpu.fast_window import Window, window

RNG = np.random.default_rng(5)
GEOMETRIES = [
    # (H, W), kernel, strides, dilations, pads (y0, x0, y1, x1), ceil_mode
    ((9, 9), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), False),
    ((9, 10), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), False),
    ((10, 9), (3, 3), (2, 2), (1, 1), (0, 1, 1, 0), True),
    ((11, 13), (5, 3), (3, 2), (1, 1), (2, 0, 1, 2), False),
    ((12, 12), (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), False),
    ((13, 11), (3, 2), (2, 3), (2, 1), (1, 0, 0, 1), True),
    ((7, 7), (7, 7), (1, 1), (1, 1), (0, 0, 0, 0), False),
    ((6, 8), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), False),
    ((5, 5), (3, 3), (4, 4), (1, 1), (1, 1, 1, 1), True),
    ((1, 9), (1, 3), (1, 2), (1, 1), (0, 1, 0, 1), False),
    ((40, 40), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), False),  # a long grid: tap by tap
]


def geometry(spatial, kernel, strides, dilations, pads, ceil_mode) -> Window:
    return window(spatial, kernel, strides=strides, dilations=dilations, pads=pads,
                  ceil_mode=ceil_mode)  # fmt: skip


def tap_reference(x: np.ndarray, win: Window, fill: float) -> list[np.ndarray]:
    """Each tap's (N, C, Ho, Wo) inputs from an np.pad'ed float64 copy."""
    widths = [(0, 0), (0, 0)] + [
        (b, e + x_) for b, e, x_ in zip(win.begin, win.end, win.extra)
    ]  # fmt: skip
    xp = np.pad(x.astype(np.float64), widths, constant_values=fill)
    return [xp[(slice(None), slice(None), *win.tap_slices(tap))] for tap in win.taps]


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: f"{g[0]}k{g[1]}s{g[2]}d{g[3]}")
def test_every_tap_reads_the_padded_window(geo) -> None:
    x = RNG.standard_normal((2, 3, *geo[0])).astype(np.float32)
    win = geometry(*geo)
    taps = flat_taps(x, win, -7.0)
    for got, want in itertools.zip_longest(taps.taps(), tap_reference(x, win, -7.0)):
        grid = taps.grid("acc")
        np.copyto(grid, got)
        np.testing.assert_array_equal(taps.crop(grid), want.astype(np.float32))


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: f"{g[0]}k{g[1]}s{g[2]}d{g[3]}")
def test_depthwise_conv_and_pools_match_the_tap_reference(geo) -> None:
    x = RNG.standard_normal((2, 5, *geo[0])).astype(np.float32)
    win = geometry(*geo)
    w = RNG.standard_normal((5, 1, *win.kernel)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    out = np.empty((2, 5, *win.out), np.float32)

    fast_conv.conv(x, w, b, win, 5, out)
    taps = tap_reference(x, win, 0.0)
    want = sum(t * w[:, 0].reshape(5, -1)[:, i, None, None] for i, t in enumerate(taps))
    np.testing.assert_allclose(out, want + b[:, None, None], rtol=1e-5, atol=1e-5)

    fast_pool.max_pool(x, win, out)
    np.testing.assert_array_equal(out, np.max(tap_reference(x, win, -np.inf), axis=0))

    counts = np.full(win.out, float(len(taps)), np.float32)
    fast_pool.avg_pool(x, win, counts, out)
    np.testing.assert_allclose(out, sum(taps) / len(taps), rtol=1e-5, atol=1e-6)


def test_only_two_dimensional_windows_use_the_grid() -> None:
    x = np.zeros((1, 2, 5, 5, 5), np.float32)
    with pytest.raises(ValueError, match="2-D window"):
        flat_taps(x, window((5, 5, 5), (3, 3, 3)), 0.0)


@pytest.mark.parametrize("spatial,kernel", [((11,), (4,)), ((4, 5, 6), (2, 3, 2))])
def test_other_ranks_use_strided_taps(spatial, kernel) -> None:
    x = RNG.standard_normal((2, 3, *spatial)).astype(np.float32)
    win = window(spatial, kernel, pads=[1] * (2 * len(spatial)))
    w = RNG.standard_normal((3, 1, *kernel)).astype(np.float32)
    out = np.empty((2, 3, *win.out), np.float32)
    fast_conv.conv(x, w, None, win, 3, out)
    taps = tap_reference(x, win, 0.0)
    bcast = (3,) + (1,) * len(spatial)
    want = sum(t * w.reshape(3, -1)[:, i].reshape(bcast) for i, t in enumerate(taps))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: f"{g[0]}k{g[1]}s{g[2]}d{g[3]}")
def test_dense_and_grouped_conv_match_the_tap_reference(geo, group) -> None:
    x = RNG.standard_normal((2, 4, *geo[0])).astype(np.float32)
    win = geometry(*geo)
    w = RNG.standard_normal((6, 4 // group, *win.kernel)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    out = np.empty((2, 6, *win.out), np.float32)
    fast_conv.conv(x, w, b, win, group, out)
    taps = np.stack(tap_reference(x, win, 0.0), axis=2)  # (N, C, taps, Ho, Wo)
    taps = taps.reshape(2, group, 4 // group, -1, *win.out)
    wg = w.reshape(group, 6 // group, 4 // group, -1).astype(np.float64)
    want = np.einsum("ngctyx,gmct->ngmyx", taps, wg).reshape(2, 6, *win.out)
    np.testing.assert_allclose(out, want + b[:, None, None], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: f"{g[0]}k{g[1]}s{g[2]}d{g[3]}")
def test_tap_blocks_cover_every_tap_once(geo) -> None:
    x = RNG.standard_normal((1, 2, *geo[0])).astype(np.float32)
    win = geometry(*geo)
    taps = flat_taps(x, win, 0.0)
    found = np.full((1, 2, *win.kernel, taps.length), np.nan, np.float32)
    count = np.zeros(win.kernel, int)
    for ky, kx, view in taps.tap_blocks():
        found[:, :, ky, kx] = view
        count[ky, kx] += 1
    assert (count == 1).all()
    for (ky, kx), src in zip(win.taps, taps.taps()):
        np.testing.assert_array_equal(found[:, :, ky, kx], src)
