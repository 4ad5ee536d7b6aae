"""Static loop-iteration bounds, and the backends that refuse kernels above their limit."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.errors import KernelCompileError
from spawnml.kernel import Output, Tensor, ir, kernel
from spawnml.kernel.analysis import check_loop_limit, loop_iterations
from spawnml.testing import suite_kernels as K


@kernel
def nested_sum(x: Tensor, out: Output, a: int, b: int):
    acc = 0.0
    for _i in range(a):
        for j in range(b):
            acc = acc + x.flat[j]
    return acc


def test_nested_loops_count_every_iteration_and_exit():
    spec = nested_sum.specialize([((300,), "float32")], ((1,), "float32"), a=300, b=300)
    assert loop_iterations(spec.body) == 300 * (1 + 300 + 1) + 1 + 1
    spec = K.reduce.specialize([((2, 7), "float32")], ((2,), "float32"), axis=1, op=0)
    assert loop_iterations(spec.body) == 7 + 1


def test_data_dependent_bounds_are_unknown():
    spec = K.cumsum_rows.specialize([((4, 6), "float32")], ((4, 6), "float32"), exclusive=False)
    assert loop_iterations(spec.body) is None


def test_check_loop_limit_refuses_with_the_reason():
    spec = nested_sum.specialize([((300,), "float32")], ((1,), "float32"), a=300, b=300)
    check_loop_limit("webgpu", spec, None)
    check_loop_limit("webgpu", spec, 10**6)
    with pytest.raises(KernelCompileError, match="65535"):
        check_loop_limit("webgpu", spec, 65535)


def _limited_backend(name: str):
    """The backend ``name`` and its declared loop limit (skips where it has none)."""
    from spawnml import get_backend, list_backends

    info = {i.name: i for i in list_backends()}.get(name)
    if info is None or not info.available:
        pytest.skip(f"{name} is not available here")
    backend = get_backend(name)
    limit = backend.capabilities.extras.get("max_loop_iterations")
    if limit is None:
        pytest.skip(f"{name} declares no loop limit on {info.device}")
    return backend, limit


@pytest.mark.parametrize("name", ["webgpu", "webgl"])
def test_llvmpipe_backends_refuse_instead_of_truncating(name):
    from spawnml.kernel import run_kernel

    backend, _ = _limited_backend(name)

    x = np.ones(300, np.float32)
    with pytest.raises(KernelCompileError, match="loop iterations"):
        run_kernel(backend, nested_sum, [x], (1,), "float32", a=300, b=300)
    ok = run_kernel(backend, nested_sum, [x], (1,), "float32", a=2, b=100)
    assert ok[0] == 200.0


@kernel
def nest3(x: Tensor, out: Output, a: int, b: int, c: int):
    acc = 0.0
    for i in range(a):
        for _j in range(b):
            for _k in range(c):
                acc = acc + x.flat[i]
    return acc


def test_loops_of_at_most_one_trip_are_not_loops():
    """range() with compile-time bounds and <= 1 trip is unrolled when specialised: no For
    is left (a trip-1 loop costs a branch, and on llvmpipe's GLSL path its loop limiter)."""
    spec = nest3.specialize([((5,), "float32")], ((1,), "float32"), a=5, b=1, c=0)
    (loop,) = [s for s in spec.body if isinstance(s, ir.For)]
    assert not any(isinstance(s, ir.For) for s in loop.body)
    spec = nest3.specialize([((5,), "float32")], ((1,), "float32"), a=5, b=1, c=1)
    assert loop_iterations(spec.body) == 5 + 1


def test_loop_exits_count_with_their_depth():
    spec = nest3.specialize([((10,), "float32")], ((1,), "float32"), a=10, b=3, c=3)
    # c: 3 + 1 exit; b: 3 * (1 + 4) + 1 + 1 (one loop below); a: 10 * (1 + 17) + 1 + 2
    assert loop_iterations(spec.body) == 10 * 18 + 3


@pytest.mark.parametrize("name", ["webgpu", "webgl"])
@pytest.mark.parametrize(("b", "c"), [(1, 1), (2, 1), (3, 3), (2, 5), (7, 2), (40, 1)])
def test_kernels_accepted_under_the_loop_limit_are_exact(name, b, c):
    """The class behind the #27 AlexNet failure on webgl: a kernel the limit check accepts
    must not be cut short by the device. The largest outer trip count the check accepts
    runs exactly; one more is refused."""
    from spawnml.kernel import run_kernel

    backend, limit = _limited_backend(name)

    def accepted(a: int) -> bool:
        spec = nest3.specialize([((a,), "float32")], ((16,), "float32"), a=a, b=b, c=c)
        try:  # the kernel as compiled: scheduled (short inner loops are unrolled)
            backend.check_limits(backend.schedule(spec))
        except KernelCompileError:
            return False
        return True

    lo, hi = 1, limit + 1  # accepted(lo), not accepted(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if accepted(mid) else (lo, mid)
    x = np.ones(hi, np.float32)
    got = run_kernel(backend, nest3, [x[:lo]], (16,), "float32", a=lo, b=b, c=c)
    np.testing.assert_array_equal(got, np.full(16, lo * b * c, np.float32))
    with pytest.raises(KernelCompileError, match="loop iterations"):
        run_kernel(backend, nest3, [x], (16,), "float32", a=hi, b=b, c=c)
