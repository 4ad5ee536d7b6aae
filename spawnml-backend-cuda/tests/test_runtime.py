"""The CUDA runtime on a real GPU: the kernel suite and queued work. Skips without one."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.errors import KernelCompileError
from spawnml.kernel import Output, Tensor, kernel
from spawnml.testing.kernel_suite import CASES, check_case, unsupported_reason
from spawnml_backend_cuda import CUDABackend


@pytest.fixture(scope="module")
def cuda() -> CUDABackend:
    info = CUDABackend.probe()
    if not info.available:
        pytest.skip(f"no CUDA runtime here: {info.reason}")
    return CUDABackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_suite_on_cuda(cuda: CUDABackend, case) -> None:
    reason = unsupported_reason(cuda, case)
    if reason:
        pytest.skip(reason)
    check_case(cuda, case)


@kernel
def twice(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0


def test_chained_launches_run_in_order(cuda: CUDABackend) -> None:
    n = (1 << 20) + 3
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    program = cuda.compile(twice.specialize([((n,), "float32")], ((n,), "float32")))
    a = cuda.upload(x)
    b, c = cuda.alloc(4 * n), cuda.alloc(4 * n)
    cuda.launch(program, b, [a])
    cuda.launch(program, c, [b])
    np.testing.assert_array_equal(cuda.download(c, (n,), "float32"), x * 4)
    for buf in (a, b, c):
        cuda.free(buf)


def test_a_broken_kernel_raises_with_the_log(cuda: CUDABackend) -> None:
    source = 'extern "C" __global__ void k_bad(float *out) { out[0] = undefined_thing; }'
    with pytest.raises(KernelCompileError) as info:
        cuda.program_from_source(source, "k_bad", 1, 0)
    assert "undefined_thing" in info.value.log


def test_capabilities_come_from_the_device(cuda: CUDABackend) -> None:
    caps = cuda.capabilities
    assert caps.max_buffer_bytes == cuda._rt.device.total_memory()
    assert caps.extras["compute_capability"] == cuda._rt.compute_capability
