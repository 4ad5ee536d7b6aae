"""The kernel suite on both CPU executors (native LLVM code and numpy), and on numpy with
every polyfill forced."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import get_backend
from spawnml.testing.kernel_suite import CASES, check_case, unsupported_reason
from spawnml_backend_cpu import executor, numpy_codegen


@pytest.fixture(scope="module")
def cpu():
    return get_backend("cpu")


@pytest.fixture(scope="module", params=["native", "numpy"])
def executor_backend(request):
    from spawnml_backend_cpu.backend import CPUBackend

    if request.param == "native":
        pytest.importorskip("llvmlite", reason="the native executor needs llvmlite")
    return CPUBackend(jit=request.param == "native")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_suite_on_cpu(executor_backend, case):
    reason = unsupported_reason(executor_backend, case)
    if reason:
        pytest.skip(reason)
    check_case(executor_backend, case)


POLYFILLED = {
    "min",
    "max",
    "abs",
    "sign",
    "fmod",
    "pymod",
    "floordiv",
    "floormod",
    "truncdiv",
    "truncmod",
    "isfinite",
    "rsqrt",
    "trunc",
    "round",
}


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CASES
        if c.name.startswith(("int_", "unary_", "binary_", "nan_", "index_", "is_", "clip", "relu"))
    ],
    ids=lambda c: c.name,
)
def test_polyfills_written_in_the_kernel_language(monkeypatch, case):
    """Render every polyfillable intrinsic from spawnml.kernel.polyfills, as targets without
    the intrinsic do, and check the same references."""
    from spawnml_backend_cpu.backend import CPUBackend

    monkeypatch.setattr(executor, "NATIVE", executor.NATIVE - POLYFILLED)
    monkeypatch.setattr(
        numpy_codegen,
        "_CALLS",
        {k: v for k, v in numpy_codegen._CALLS.items() if k not in POLYFILLED},
    )
    backend = CPUBackend(jit=False)
    check_case(backend, case)
    program = backend.compile(
        case.kernel.specialize(case.inputs, (case.out_shape, case.out_dtype), **case.consts)
    )
    assert "_np.minimum" not in program.source and "_np.floor_divide" not in program.source


def test_dump_kernels_writes_generated_source(tmp_path, monkeypatch):
    from spawnml.kernel import run_kernel
    from spawnml.testing import suite_kernels as K
    from spawnml_backend_cpu.backend import CPUBackend

    monkeypatch.setenv("SPAWNML_DUMP_KERNELS", str(tmp_path))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run_kernel(CPUBackend(jit=False), K.transpose, [x], (3, 2), "float32", perm=(1, 0))
    np.testing.assert_array_equal(out, x.T)
    files = list((tmp_path / "cpu").glob("transpose-*.py"))
    assert len(files) == 1
    assert "def kernel(" in files[0].read_text()


def test_large_reduction_is_chunked_and_correct(cpu):
    from spawnml.kernel import run_kernel
    from spawnml.testing import suite_kernels as K

    x = np.random.default_rng(1).standard_normal((3000, 1500)).astype(np.float32)
    got = run_kernel(cpu, K.reduce, [x], (3000,), "float32", axis=1, op=0)
    np.testing.assert_allclose(got, x.sum(1, dtype=np.float64), rtol=1e-4, atol=1e-3)
