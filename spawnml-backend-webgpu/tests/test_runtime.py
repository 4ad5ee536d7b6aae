"""WebGPU runtime: device limits, packing, large dispatches, f16, sharing, batching."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, OutOfMemoryError
from spawnml.kernel import Output, Tensor, kernel, run_kernel
from spawnml_backend_webgpu import WebGPUBackend


# fmt: off
@kernel
def concat12(t0: Tensor, t1: Tensor, t2: Tensor, t3: Tensor, t4: Tensor, t5: Tensor,
             t6: Tensor, t7: Tensor, t8: Tensor, t9: Tensor, t10: Tensor, t11: Tensor,
             out: Output):
    i = out.flat
    n0 = t0.size
    n1 = n0 + t1.size
    n2 = n1 + t2.size
    n3 = n2 + t3.size
    n4 = n3 + t4.size
    n5 = n4 + t5.size
    n6 = n5 + t6.size
    n7 = n6 + t7.size
    n8 = n7 + t8.size
    n9 = n8 + t9.size
    n10 = n9 + t10.size
    if i < n0:
        return t0.flat[i]
    if i < n1:
        return t1.flat[i - n0]
    if i < n2:
        return t2.flat[i - n1]
    if i < n3:
        return t3.flat[i - n2]
    if i < n4:
        return t4.flat[i - n3]
    if i < n5:
        return t5.flat[i - n4]
    if i < n6:
        return t6.flat[i - n5]
    if i < n7:
        return t7.flat[i - n6]
    if i < n8:
        return t8.flat[i - n7]
    if i < n9:
        return t9.flat[i - n8]
    if i < n10:
        return t10.flat[i - n9]
    return t11.flat[i - n10]
# fmt: on


@kernel
def affine(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0 + 1.0


@kernel
def fma(a: Tensor, b: Tensor, c: Tensor, out: Output):
    return a.flat[out.flat] * b.flat[out.flat] + c.flat[out.flat]


@kernel
def shift_left(x: Tensor, out: Output):
    """Reads its neighbour: wrong if the output buffer were also the input."""
    i = out.flat
    return x.flat[i + 1] if i + 1 < x.size else x.flat[0]


@pytest.fixture(scope="module")
def four_buffer_backend(backend: WebGPUBackend) -> WebGPUBackend:
    """A device the application created, allowing 4 storage buffers per shader stage."""
    device = backend.ctx.device.adapter.request_device_sync(
        required_features=list(backend.ctx.device.features),
        required_limits={"max-storage-buffers-per-shader-stage": 4},
    )
    assert device.limits["max-storage-buffers-per-shader-stage"] == 4
    return WebGPUBackend(device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_twelve_inputs_on_a_four_buffer_device(four_buffer_backend, dtype) -> None:
    if dtype == "float16" and not four_buffer_backend.capabilities.float16_arithmetic:
        pytest.skip("adapter without shader-f16")
    rng = np.random.default_rng(1)
    # odd lengths: packed f16 members must still start on 4-byte boundaries
    parts = [(rng.standard_normal(3 + 2 * k) * 100).astype(dtype) for k in range(12)]
    expected = np.concatenate(parts)
    got = run_kernel(four_buffer_backend, concat12, parts, expected.shape, dtype)
    np.testing.assert_array_equal(got, expected)
    spec = concat12.specialize(parts, (expected.shape, dtype))
    assert four_buffer_backend.compile(spec).layout.packed


def test_ten_million_outputs_use_a_multidimensional_dispatch(backend) -> None:
    n = 10_000_000
    x = np.arange(n, dtype=np.float32) * np.float32(0.5)
    program = backend.compile(affine.specialize([x], ((n,), "float32")))
    assert program.layout.grid[1] > 1  # more workgroups than one dimension allows
    got = run_kernel(backend, affine, [x], (n,), "float32")
    np.testing.assert_array_equal(got, x * np.float32(2) + np.float32(1))


def test_f16_runs_natively_and_rounds_like_numpy(backend) -> None:
    if not backend.capabilities.float16_arithmetic:
        pytest.skip("adapter without shader-f16 (declared in capabilities)")
    rng = np.random.default_rng(2)
    a, b, c = ((rng.standard_normal(4096) * 8).astype(np.float16) for _ in range(3))
    got = run_kernel(backend, fma, [a, b, c], a.shape, "float16")
    source = backend.compile(fma.specialize([a, b, c], (a.shape, "float16"))).source
    assert "enable f16;" in source and "array<f16>" in source
    # f16 products and sums, each rounded to f16 (a fused multiply-add may round once)
    stepwise = ((a * b) + c).astype(np.float16)
    fused = (a.astype(np.float64) * b + c).astype(np.float16)
    ulp = np.spacing(np.abs(stepwise)).astype(np.float64)
    got64 = got.astype(np.float64)
    off = np.minimum(np.abs(got64 - stepwise), np.abs(got64 - fused))
    assert np.all(off <= ulp), f"max error {np.max(off / ulp)} ulp"
    assert np.mean((got == stepwise) | (got == fused)) > 0.99


def test_int64_is_range_checked_at_upload(backend) -> None:
    assert backend.storage_dtype(DType.int64) is DType.int32
    with pytest.raises(InvalidInputError, match="outside the int32 range"):
        backend.upload(np.array([2**40], np.int64))


def test_output_buffer_also_an_input_is_copied_first(backend) -> None:
    x = np.arange(1000, dtype=np.float32)
    spec = shift_left.specialize([x], (x.shape, "float32"))
    program = backend.compile(spec)
    buf = backend.upload(x)
    try:
        backend.launch(program, buf, [buf])
        got = backend.download(buf, x.shape, "float32")
    finally:
        backend.free(buf)
    np.testing.assert_array_equal(got, np.roll(x, -1))


def test_buffers_above_the_binding_limit_are_rejected(backend) -> None:
    limit = backend.capabilities.max_buffer_bytes
    with pytest.raises(OutOfMemoryError, match="exceeds this device's limit"):
        backend.alloc(limit + 4)


def test_a_device_the_application_made_is_shared(backend) -> None:
    other = WebGPUBackend(backend.ctx.device)
    assert other.ctx is backend.ctx  # same queue, batch and pipeline cache
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(run_kernel(other, affine, [x], x.shape, "float32"), x * 2 + 1)


def test_chained_launches_are_batched_until_a_read(backend) -> None:
    x = np.ones(256, np.float32)
    spec = affine.specialize([x], (x.shape, "float32"))
    program = backend.compile(spec)
    a, b = backend.upload(x), backend.alloc(x.nbytes)
    try:
        for _ in range(10):
            backend.launch(program, b, [a])
            backend.launch(program, a, [b])
        assert backend.ctx.launches == 20  # queued, not submitted
        got = backend.download(a, x.shape, "float32")
        assert backend.ctx.encoder is None
    finally:
        backend.free(a)
        backend.free(b)
    expected = x.astype(np.float64)
    for _ in range(20):
        expected = expected * 2 + 1
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def _in_subprocess(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_adapter_chosen_by_name(backend) -> None:
    code = ("from spawnml_backend_webgpu import WebGPUBackend; "
            "print(WebGPUBackend().capabilities.extras['adapter'])")
    name = backend.capabilities.extras["adapter"].split()[0]
    done = _in_subprocess(code, SPAWNML_WEBGPU_ADAPTER=name)
    assert done.returncode == 0, done.stderr
    assert name in done.stdout
    done = _in_subprocess(code, SPAWNML_WEBGPU_ADAPTER="no-such-adapter")
    assert "matches no adapter" in done.stderr
