"""The cpu backend's native executor (kernel IR -> LLVM -> machine code): what differs from
numpy is checked here, each against numpy or the numpy executor; the whole kernel suite runs
on both executors in test_kernel_suite.py."""


from __future__ import annotations

import re

import numpy as np
import pytest

from spawnml.errors import InvalidInputError, KernelCompileError
from spawnml.kernel import Output, Tensor, cast, f32, kernel, run_kernel
from spawnml.testing import suite_kernels as K

pytest.importorskip("llvmlite", reason="the native executor needs llvmlite")

from spawnml_backend_cpu.backend import CPUBackend, jit_enabled
from spawnml_backend_cpu.native import jit


@pytest.fixture(scope="module")
def native():
    return CPUBackend(jit=True, threads=1)


@kernel
def shifted_read(x: Tensor, out: Output, offset: int):
    return x.flat[out.flat + offset]


@kernel
def to_int(x: Tensor, out: Output):
    return cast(x.flat[out.flat], out.dtype)


def test_reads_outside_a_buffer_clamp_to_its_ends(native):
    """Loads the value ranges cannot prove inside read the nearest element, as on numpy."""
    x = np.arange(10, dtype=np.float32)
    for offset in (-3, 4):
        got = run_kernel(native, shifted_read, [x], (10,), "float32", offset=offset)
        want = x[np.clip(np.arange(10) + offset, 0, 9)]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", ["int32", "int64", "uint32"])
def test_float_to_int_conversion_saturates(native, dt):
    """LLVM's plain fptosi is undefined out of range: conversions saturate (NaN -> 0)."""
    x = np.array([1.9, -1.9, np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19], np.float32)
    got = run_kernel(native, to_int, [x], (8,), dt)

    def saturated(v: float, lo: int, hi: int) -> int:
        return 0 if np.isnan(v) else hi if v >= hi else lo if v <= lo else int(v)

    if dt == "uint32":  # through int64, wrapped to 32 bits (as numpy does in int64 range)
        want = [saturated(v, -(2**63), 2**63 - 1) % 2**32 for v in x.tolist()]
    else:
        info = np.iinfo(dt)
        want = [saturated(v, int(info.min), int(info.max)) for v in x.tolist()]
    np.testing.assert_array_equal(got, np.array(want, dtype=dt))


@pytest.mark.parametrize("dt", ["float16", "float64", "int8", "uint16", "bool"])
def test_narrow_and_wide_storage_round_trips(native, dt):
    """Storage types other than the compute types (half, double, 8/16-bit, bool bytes)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(37) * 50).astype(dt)
    got = run_kernel(native, K.copy, [x], (37,), dt)
    np.testing.assert_array_equal(got, x if dt != "float64" else x.astype(np.float32))


def test_tiled_matmul_uses_vectors_and_matches_numpy(native, tmp_path, monkeypatch):
    monkeypatch.setenv("SPAWNML_DUMP_KERNELS", str(tmp_path))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 37, 29)).astype(np.float32)
    b = rng.standard_normal((2, 29, 45)).astype(np.float32)
    got = run_kernel(native, K.matmul, [a, b], (2, 37, 45), "float32")
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    (source,) = [p.read_text() for p in (tmp_path / "cpu").glob("matmul-*.ll")]
    lanes = {int(n) for n in re.findall(r"<(\d+) x float>", source)}
    assert lanes and max(lanes) > 1 and max(lanes) <= native.vector_width


@pytest.mark.parametrize("threads", [2, 3])
def test_threads_split_a_launch_exactly(threads):
    """A launch split across threads (ranges of the invocations) equals the one-thread run;
    odd splits leave no invocation out or computed twice."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((771, 129)).astype(np.float32)
    one = run_kernel(CPUBackend(jit=True, threads=1), K.softmax_fused, [x], x.shape, "float32")
    backend = CPUBackend(jit=True, threads=threads)
    spec = K.softmax_fused.specialize({"x": x}, (x.shape, "float32"))
    assert backend.compile(spec).parts(threads) == threads  # the launch is really split
    got = run_kernel(backend, K.softmax_fused, [x], x.shape, "float32")
    np.testing.assert_array_equal(got, one)


def test_object_code_comes_from_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPAWNML_CACHE_DIR", str(tmp_path))
    calls = []
    optimise = jit.Host.optimise
    monkeypatch.setattr(jit.Host, "optimise", lambda self, text: calls.append(1) or
                        optimise(self, text))
    x = np.arange(12, dtype=np.float32)
    for _ in range(2):  # a new backend each time: only the disk cache is shared
        got = run_kernel(CPUBackend(jit=True), shifted_read, [x], (12,), "float32", offset=1)
        np.testing.assert_array_equal(got, x[np.minimum(np.arange(12) + 1, 11)])
    assert len(calls) == 1
    assert list((tmp_path / "kernels" / "cpu-native").glob("*.o"))


def test_ir_that_does_not_verify_is_a_compile_error():
    with pytest.raises(KernelCompileError, match="does not verify"):
        jit.host().optimise("define void @run() {\n  ret i32 0\n}\n")


def test_jit_switch_is_validated(monkeypatch):
    monkeypatch.setenv("SPAWNML_CPU_JIT", "yes")
    with pytest.raises(InvalidInputError, match="SPAWNML_CPU_JIT"):
        jit_enabled()
    monkeypatch.setenv("SPAWNML_CPU_JIT", "0")
    assert CPUBackend().jit is False
    monkeypatch.setenv("SPAWNML_CPU_JIT", "1")
    assert CPUBackend().jit is True


def test_a_forked_child_runs_native_kernels_on_its_own_threads():
    """The pool's workers do not survive fork: a child must start its own, not wait forever
    on the parent's (multiprocessing's default start method on Linux)."""
    import multiprocessing

    x = np.random.default_rng(3).standard_normal((771, 129)).astype(np.float32)
    parent = run_kernel(CPUBackend(jit=True, threads=2), K.softmax_fused, [x], x.shape,
                        "float32")  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as workers:
        child = workers.apply_async(_softmax_on_two_threads, (x,)).get(timeout=60)
    np.testing.assert_array_equal(child, parent)


def _softmax_on_two_threads(x: np.ndarray) -> np.ndarray:
    return run_kernel(CPUBackend(jit=True, threads=2), K.softmax_fused, [x], x.shape, "float32")


def test_a_broken_llvmlite_gives_numpy_code_with_a_warning_or_a_clear_error(monkeypatch,
                                                                            caplog):
    from spawnml.errors import BackendUnavailableError
    from spawnml_backend_cpu import backend as cpu_backend

    monkeypatch.setattr(cpu_backend, "native_unavailable", lambda: "llvmlite is broken")
    monkeypatch.delenv("SPAWNML_CPU_JIT", raising=False)
    with caplog.at_level("WARNING", logger="spawnml.cpu"):
        assert CPUBackend().jit is False
    assert "llvmlite is broken" in caplog.text
    monkeypatch.setenv("SPAWNML_CPU_JIT", "1")
    with pytest.raises(BackendUnavailableError, match="llvmlite is broken"):
        CPUBackend()


@kernel
def dot_rows(a: Tensor, b: Tensor, out: Output):
    i, j = out.index
    acc = 0.0
    for k in range(a.shape[1]):
        acc = acc + cast(a[i, k], f32) * cast(b[k, j], f32)
    return cast(acc, out.dtype)


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_loop_sums_contract_except_in_16_bit_float_kernels(native, dt):
    """f32 sums in loops may fuse multiply-adds (BLAS-like); f16 kernels keep plain order."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((9, 33)).astype(dt)
    b = rng.standard_normal((33, 5)).astype(dt)
    spec = dot_rows.specialize([a, b], ((9, 5), dt))
    source = native.renderer.render(native.schedule(spec))
    assert ("fadd contract" in source) == (dt == "float32")
    assert "reassoc" not in source  # an output's bits must not depend on its launch range
    got = run_kernel(native, dot_rows, [a, b], (9, 5), dt)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(dt)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3,
                               atol=2e-3)
