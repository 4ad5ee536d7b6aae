"""Interior versions of loop nests (spawnml.kernel.interior) and short-loop unrolling
(spawnml.kernel.unroll): the class "a bounds test hoisted out of a loop nest" must hoist only
tests that hold on every iteration, and the kernels compute what they did, on every backend,
at every edge, tiled or not."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import get_available_backends, get_backend
from spawnml.kernel import Output, Tensor, cast, f32, ir, kernel, run_kernel
from spawnml.kernel.interior import version_interior
from spawnml.kernel.ranges import fold_ranges
from spawnml.kernel.unroll import unroll_short_loops

BACKENDS = [b for b in ("opencl", "wasm", "webgpu", "webgl", "cpu")
            if b in get_available_backends()]  # fmt: skip


@kernel
def window2d(x: Tensor, out: Output, pad: int, stride: int, dil: int, size: int):
    """A padded, strided, dilated k x k window sum (conv's shape of tests)."""
    i, j = out.index
    acc = 0.0
    for ky in range(size):
        iy = i * stride - pad + ky * dil
        for kx in range(size):
            ix = j * stride - pad + kx * dil
            if 0 <= iy < x.shape[0] and 0 <= ix < x.shape[1]:
                acc = acc + x[iy, ix] * cast(1 + ky * 10 + kx, f32)
    return acc


@kernel
def carried(x: Tensor, out: Output):
    """The test reads ``c`` before the loop assigns it: the value from the last iteration
    (or the one before the loop), which the loop variable alone does not give."""
    i = out.index[0]
    acc = 0.0
    c = i
    for k in range(3):
        if 0 <= c - 1 < x.shape[0]:
            acc = acc + x[c - 1]
        c = i + k * 5
    return acc


@kernel
def squared(x: Tensor, out: Output):
    """A test that is not linear in the loop variable: never hoisted."""
    i = out.index[0]
    acc = 0.0
    for k in range(4):
        t = i + k * k - 2
        if 0 <= t < x.shape[0]:
            acc = acc + x[t]
    return acc


def _window_reference(x, pad, stride, dil, k, shape):
    xp = np.pad(x, pad)
    out = np.zeros(shape, np.float32)
    for ky in range(k):
        for kx in range(k):
            sl = xp[ky * dil: ky * dil + stride * shape[0]: stride,
                    kx * dil: kx * dil + stride * shape[1]: stride]  # fmt: skip
            out += sl[: shape[0], : shape[1]] * (1.0 + ky * 10.0 + kx)
    return out


def _top_ifs(k: ir.KernelIR) -> list[ir.If]:
    return [s for s in k.body if isinstance(s, ir.If)]


def test_the_interior_version_has_no_bounds_tests():
    spec = window2d.specialize([((9, 11), "float32")], ((9, 11), "float32"), pad=1, stride=1,
                               dil=1, size=3)  # fmt: skip
    versioned = fold_ranges(version_interior(spec))
    (split,) = _top_ifs(versioned)
    interior, border = split.then, split.orelse
    assert not any(isinstance(s, ir.If) for s in ir.walk_stmts(interior))
    assert any(isinstance(s, ir.If) for s in ir.walk_stmts(border))
    # and every read in the interior is proven inside x (no clamp on targets that clamp)
    loads = [e for e in ir.all_exprs(interior) if isinstance(e, ir.Load)]
    assert loads and all(e.in_range for e in loads)


@pytest.mark.parametrize("kern", [carried, squared])
def test_tests_that_do_not_hold_by_corners_stay(kern):
    spec = kern.specialize([((12,), "float32")], ((12,), "float32"))
    assert version_interior(spec) is spec


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize(("pad", "stride", "dil", "k", "hw"), [
    (1, 1, 1, 3, (9, 11)), (2, 2, 1, 5, (7, 6)), (2, 1, 2, 3, (10, 13)), (0, 1, 1, 3, (8, 8)),
    (3, 1, 1, 3, (4, 4)),  # no output lies inside: the border version everywhere
])  # fmt: skip
def test_windows_compute_what_numpy_does(backend_name, pad, stride, dil, k, hw):
    backend = get_backend(backend_name)
    x = np.random.default_rng(0).standard_normal(hw).astype(np.float32)
    shape = tuple((n + 2 * pad - dil * (k - 1) - 1) // stride + 1 for n in hw)
    got = run_kernel(backend, window2d, [x], shape, "float32", pad=pad, stride=stride,
                     dil=dil, size=k)  # fmt: skip
    want = _window_reference(x, pad, stride, dil, k, shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("kern", [carried, squared])
def test_kept_tests_compute_what_numpy_does(backend_name, kern):
    backend = get_backend(backend_name)
    x = np.arange(1, 13, dtype=np.float32)
    got = run_kernel(backend, kern, [x], (12,), "float32")
    want = np.zeros(12, np.float32)
    for i in range(12):
        if kern is carried:
            c = i
            for kk in range(3):
                if 0 <= c - 1 < 12:
                    want[i] += x[c - 1]
                c = i + kk * 5
        else:
            for kk in range(4):
                t = i + kk * kk - 2
                if 0 <= t < 12:
                    want[i] += x[t]
    np.testing.assert_array_equal(got, want)


@kernel
def short_and_long(x: Tensor, out: Output, n: int):
    i = out.index[0]
    acc = 0.0
    for a in range(n):
        for b in range(3):
            acc = acc + x[(i + a + b) % x.shape[0]] * cast(b + 1, f32)
    return acc


def test_short_innermost_loops_unroll_and_long_ones_stay():
    spec = short_and_long.specialize([((16,), "float32")], ((16,), "float32"), n=40)
    unrolled = unroll_short_loops(spec)
    loops = [s for s in ir.walk_stmts(unrolled.body) if isinstance(s, ir.For)]
    assert [(int(s.stop.value)) for s in loops] == [40]  # the b loop is gone, a stays
    assert not any(isinstance(s, ir.For) for s in ir.walk_stmts(loops[0].body))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_unrolled_loops_compute_what_numpy_does(backend_name):
    backend = get_backend(backend_name)
    x = np.arange(16, dtype=np.float32)
    got = run_kernel(backend, short_and_long, [x], (16,), "float32", n=5)
    want = np.array([sum(x[(i + a + b) % 16] * (b + 1) for a in range(5) for b in range(3))
                     for i in range(16)], np.float32)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-6)
