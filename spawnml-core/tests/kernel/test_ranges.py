"""Value ranges (spawnml.kernel.ranges): a comparison is folded only when every value the
kernel can compute decides it, and the folded kernel computes what the original did."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import get_available_backends
from spawnml.kernel import Output, Tensor, ir, kernel, run_kernel
from spawnml.kernel.ranges import fold_ranges

BACKENDS = [b for b in ("opencl", "wasm", "webgpu", "webgl") if b in get_available_backends()]


@kernel
def window(x: Tensor, out: Output, pad: int):
    i, j = out.index
    acc = 0.0
    for k in range(3):
        c = j - pad + k
        if 0 <= c < x.shape[1]:
            acc = acc + x[i, c]
    return acc


@kernel
def unguarded(x: Tensor, out: Output):
    i, j = out.index
    acc = 0.0
    for k in range(3):
        acc = acc + x[i, j + k]
    return acc


@kernel
def outside_read(x: Tensor, out: Output):
    i, j = out.index
    c = j - 1
    acc = 0.0
    if 0 <= c < x.shape[1]:
        acc = 1.0
    else:
        acc = x[i, c]  # c is -1 here: clamped on targets that clamp, never "in range"
    return acc


@kernel
def wrapped_test(x: Tensor, out: Output):
    i = out.index[0]
    acc = 0.0
    if i + 2147483000 < 2147483600:  # wraps for i > 647: says nothing exact about i
        acc = x[i + 700]
    return acc


@kernel
def huge(x: Tensor, out: Output):
    i = out.index[0]
    if i * 100000000 < 5:  # wraps in i32 for i >= 22: never decided by ranges
        return 1.0
    return x[i]


@kernel
def counted(x: Tensor, out: Output):
    i = out.index[0]
    n = 0
    for k in range(x.shape[0]):
        if k < x.shape[0]:  # always true: folded
            n = n + 1
        if k < i:  # depends on the invocation: kept
            n = n + 2
    if n <= x.shape[0]:  # n grows in the loop: widened, kept
        return 0.0
    return 1.0


def _ifs(k: ir.KernelIR) -> int:
    return sum(isinstance(s, ir.If) for s in ir.walk_stmts(k.body))


def test_index_tests_without_padding_fold_away():
    spec = window.specialize([((4, 8), "float32")], ((4, 6), "float32"), pad=0)
    assert _ifs(spec) == 1
    assert _ifs(fold_ranges(spec)) == 0


def test_index_tests_with_padding_are_kept():
    spec = window.specialize([((4, 8), "float32")], ((4, 8), "float32"), pad=1)
    assert _ifs(fold_ranges(spec)) == 1


def test_wrapping_arithmetic_is_never_decided():
    spec = huge.specialize([((64,), "float32")], ((64,), "float32"))
    assert _ifs(fold_ranges(spec)) == _ifs(spec) == 1


def _loads(k: ir.KernelIR) -> list[ir.Load]:
    return [e for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)]


def test_loads_proven_inside_their_buffer_are_marked():
    inside = fold_ranges(window.specialize([((4, 8), "float32")], ((4, 6), "float32"), pad=0))
    assert [x.in_range for x in _loads(inside)] == [True]
    # with padding the column runs from -1 to 8, but the test guarding the read narrows it
    padded = fold_ranges(window.specialize([((4, 8), "float32")], ((4, 8), "float32"), pad=1))
    assert [x.in_range for x in _loads(padded)] == [True]
    # a read on the other side of that test is not narrowed
    outside = fold_ranges(outside_read.specialize([((4, 8), "float32")], ((4, 8), "float32")))
    assert [x.in_range for x in _loads(outside)] == [False]
    # the guard proves the read even of a buffer one element too short ...
    short = fold_ranges(window.specialize([((4, 7), "float32")], ((4, 6), "float32"), pad=0))
    assert [x.in_range for x in _loads(short)] == [True]
    # ... but the same read with no guard is not inside
    bare = fold_ranges(unguarded.specialize([((4, 7), "float32")], ((4, 6), "float32")))
    assert not any(x.in_range for x in _loads(bare))
    assert [x.in_range for x in _loads(fold_ranges(unguarded.specialize(
        [((4, 8), "float32")], ((4, 6), "float32"))))] == [True]


def test_a_test_that_may_wrap_does_not_narrow():
    """``i + k < n`` bounds ``i`` only where ``i + k`` cannot wrap: the read below would be
    out of range for i > 647 if the test were taken at its mathematical word."""
    spec = fold_ranges(wrapped_test.specialize([((1400,), "float32")], ((1000,), "float32")))
    assert [x.in_range for x in _loads(spec)] == [False]


def test_loop_variables_and_loop_carried_values():
    spec = counted.specialize([((8,), "float32")], ((8,), "float32"))
    assert _ifs(spec) == 3
    assert _ifs(fold_ranges(spec)) == 2


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_folded_kernels_compute_what_the_originals_do(backend_name):
    from spawnml import get_backend

    backend = get_backend(backend_name)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    for pad, width in ((0, 6), (1, 8)):
        got = run_kernel(backend, window, [x], (4, width), "float32", pad=pad)
        xp = np.pad(x, ((0, 0), (pad, pad)))
        want = xp[:, :width] + xp[:, 1:width + 1] + xp[:, 2:width + 2]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    v8 = np.zeros(8, np.float32)
    got = run_kernel(backend, counted, [v8], (8,), "float32")
    np.testing.assert_array_equal(got, np.where(8 + 2 * np.arange(8) <= 8, 0.0, 1.0))
