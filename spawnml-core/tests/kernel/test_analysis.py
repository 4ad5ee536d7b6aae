"""Static loop-iteration bounds, and the backends that refuse kernels above their limit."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.errors import KernelCompileError
from spawnml.kernel import Output, Tensor, kernel
from spawnml.kernel.analysis import check_loop_limit, loop_iterations
from spawnml.testing import suite_kernels as K


@kernel
def nested_sum(x: Tensor, out: Output, a: int, b: int):
    acc = 0.0
    for _i in range(a):
        for j in range(b):
            acc = acc + x.flat[j]
    return acc


def test_nested_loops_count_every_iteration():
    spec = nested_sum.specialize([((300,), "float32")], ((1,), "float32"), a=300, b=300)
    assert loop_iterations(spec.body) == 300 * (1 + 300)
    spec = K.reduce.specialize([((2, 7), "float32")], ((2,), "float32"), axis=1, op=0)
    assert loop_iterations(spec.body) == 7


def test_data_dependent_bounds_are_unknown():
    spec = K.cumsum_rows.specialize([((4, 6), "float32")], ((4, 6), "float32"), exclusive=False)
    assert loop_iterations(spec.body) is None


def test_check_loop_limit_refuses_with_the_reason():
    spec = nested_sum.specialize([((300,), "float32")], ((1,), "float32"), a=300, b=300)
    check_loop_limit("webgpu", spec, None)
    check_loop_limit("webgpu", spec, 10**6)
    with pytest.raises(KernelCompileError, match="65535"):
        check_loop_limit("webgpu", spec, 65535)


@pytest.mark.parametrize("name", ["webgpu", "webgl"])
def test_llvmpipe_backends_refuse_instead_of_truncating(name):
    from spawnml import get_backend, list_backends

    info = {i.name: i for i in list_backends()}.get(name)
    if info is None or not info.available:
        pytest.skip(f"{name} is not available here")
    backend = get_backend(name)
    limit = backend.capabilities.extras.get("max_loop_iterations")
    if limit is None:
        pytest.skip(f"{name} declares no loop limit on {info.device}")
    from spawnml.kernel import run_kernel

    x = np.ones(300, np.float32)
    with pytest.raises(KernelCompileError, match="loop iterations"):
        run_kernel(backend, nested_sum, [x], (1,), "float32", a=300, b=300)
    ok = run_kernel(backend, nested_sum, [x], (1,), "float32", a=2, b=100)
    assert ok[0] == 200.0
