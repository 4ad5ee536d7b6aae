"""The wasm plugin, probe and runtime: the kernel suite, memory, threads, SIMD, caching."""

from __future__ import annotations

import sys
from importlib import metadata

import numpy as np
import pytest

from spawnml.backend import DeviceKind
from spawnml.dtypes import DType
from spawnml.errors import BackendUnavailableError, KernelTypeError, OutOfMemoryError
from spawnml.kernel import Output, Tensor, ir, kernel, run_kernel
from spawnml.kernel.types import ScalarType
from spawnml.pending import PendingRuntime
from spawnml.plugins import PluginManager
from spawnml.testing.kernel_suite import CASES, check_case, unsupported_reason
from spawnml_backend_wasm import WasmBackend
from spawnml_backend_wasm.memory import MAX_BYTES, PAGE
from spawnml_backend_wasm.probe import probe
from spawnml_backend_wasm.simd import lane_safe
from spawnml_backend_wasm.wat import WasmRenderer


@pytest.fixture(scope="module")
def backend():
    b = WasmBackend()
    yield b
    b.close()


@kernel
def axpy(x: Tensor, y: Tensor, out: Output, a: float):
    i = out.flat
    return a * x.flat[i] + y.flat[i]


@kernel
def exp_sum(x: Tensor, out: Output):
    v = x.flat[out.flat]
    return exp(v) + v * 0.5  # noqa: F821 - intrinsic


@pytest.fixture
def reprobe():
    probe.cache_clear()
    yield probe
    probe.cache_clear()


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"wasm"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [WasmBackend]


def test_wasmtime_runs_simd128_here() -> None:
    """wasmtime is a pip dependency, so the probe must succeed wherever the package installs."""
    info = WasmBackend.probe()
    assert info.available, info.reason
    assert info.device_kind is DeviceKind.EMULATED
    assert info.device.startswith(f"wasmtime {metadata.version('wasmtime')} (SIMD128) on ")
    assert WasmBackend.probe() is info


def test_without_wasmtime(reprobe, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wasmtime", None)
    assert reprobe().reason == "wasmtime is not installed"


@pytest.mark.skipif(not issubclass(WasmBackend, PendingRuntime), reason="the runtime has landed")
def test_a_pending_runtime_says_so_instead_of_faking() -> None:
    with pytest.raises(BackendUnavailableError, match=r"wasm runtime is not implemented yet"):
        WasmBackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_suite(backend, case) -> None:
    reason = unsupported_reason(backend, case)
    if reason:
        pytest.skip(reason)
    check_case(backend, case)


def test_capabilities(backend) -> None:
    caps = backend.capabilities
    assert DType.int64 in caps.dtypes and DType.float16 not in caps.dtypes
    assert not caps.float16_arithmetic
    assert backend.storage_dtype(DType.float16) is DType.float32
    assert caps.extras["simd128"] and caps.extras["threads"]


def test_threads_and_simd_agree_with_one_scalar_thread() -> None:
    r = np.random.default_rng(0)
    x, y = (r.standard_normal(100_003).astype(np.float32) for _ in range(2))
    results = {}
    for threads, simd in ((1, False), (1, True), (2, True), (3, False)):
        b = WasmBackend(threads=threads, simd=simd)
        results[threads, simd] = (
            run_kernel(b, exp_sum, {"x": x}, x.shape, "float32"),
            run_kernel(b, axpy, {"x": x, "y": y}, x.shape, "float32", a=2.5),
        )
        b.close()
    first = results[1, False]
    for got in results.values():
        np.testing.assert_array_equal(got[0], first[0])
        np.testing.assert_array_equal(got[1], first[1])
    np.testing.assert_allclose(first[1], 2.5 * x + y, rtol=1e-6)
    np.testing.assert_allclose(
        first[0], np.exp(x.astype(np.float64)) + x * 0.5, rtol=3e-7, atol=1e-7
    )


def test_simd_is_used_where_lane_safe_only(backend) -> None:
    x = np.zeros(8, np.float32)
    k = axpy.specialize({"x": x, "y": x}, (x.shape, "float32"), a=1.0)
    assert lane_safe(k, backend.storage_dtype)
    assert "f32x4.add" in WasmRenderer(backend.storage_dtype).render(k)
    loop = next(c for c in CASES if c.name.startswith("reduce_sum"))
    spec = loop.kernel.specialize(loop.inputs, (loop.out_shape, loop.out_dtype), **loop.consts)
    assert not lane_safe(spec, backend.storage_dtype)


def test_integer_division_by_a_runtime_value_is_refused() -> None:
    """Wasm traps on x / 0 and INT_MIN / -1: only the guarded polyfills divide by variables."""
    gid = ir.GlobalIndex(ScalarType.i32)
    body = (ir.Return(1, ir.Binary(ScalarType.i32, "div", gid, gid)),)
    k = ir.KernelIR("bad", (), ir.BufferSpec("out", DType.int32, (4,)), (), body, key="bad")
    with pytest.raises(KernelTypeError, match="would trap"):
        WasmRenderer().render(k)


def test_memory_grows_for_a_tensor_larger_than_the_initial_memory(backend) -> None:
    mem = backend.runtime.memory
    before = mem.size
    x = np.arange(before // 4 + 12345, dtype=np.float32)  # more than the whole memory holds
    got = run_kernel(backend, axpy, {"x": x, "y": x}, x.shape, "float32", a=2.0)
    assert mem.size > before and mem.size % PAGE == 0
    np.testing.assert_array_equal(got, 3 * x)


def test_an_impossible_size_raises_out_of_memory(backend) -> None:
    with pytest.raises(OutOfMemoryError, match="limit"):
        backend.alloc(MAX_BYTES + 1)
    with pytest.raises(OutOfMemoryError, match="4 GiB"):
        backend.runtime.memory.allocate(MAX_BYTES - 1024)


def test_zero_copy_views_and_block_reuse(backend) -> None:
    buf = backend.upload(np.arange(10, dtype=np.int32))
    view = backend.view(buf, (10,), "int32")
    np.testing.assert_array_equal(view, np.arange(10))
    view[3] = 99  # writes linear memory itself
    assert backend.download(buf, (10,), "int32")[3] == 99
    backend.free(buf)
    mem = backend.runtime.memory
    off = mem.allocate(1000)
    mem.release(off, 1000)
    assert mem.allocate(1000) == off


def test_modules_are_cached_on_disk(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE_DIR", str(tmp_path))
    x = np.ones(5, np.float32)
    first = WasmBackend(threads=1)
    run_kernel(first, axpy, {"x": x, "y": x}, x.shape, "float32", a=3.0)
    assert list(tmp_path.rglob("*.cwasm"))
    second = WasmBackend(threads=1)
    got = run_kernel(second, axpy, {"x": x, "y": x}, x.shape, "float32", a=3.0)
    assert second.runtime.disk_hits == 1
    np.testing.assert_array_equal(got, 4 * x)
