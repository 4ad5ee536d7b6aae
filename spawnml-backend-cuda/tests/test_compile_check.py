"""Every kernel of the kernel suite compiles to PTX with NVRTC: no GPU needed, runs in CI."""

from __future__ import annotations

import shutil

import pytest

from spawnml.errors import KernelCompileError
from spawnml.testing.kernel_suite import CASES
from spawnml_backend_cuda import compile_check, compiler
from spawnml_backend_cuda.backend import render

if compiler.nvrtc_version() is None and shutil.which("nvcc") is None:
    pytest.skip("neither NVRTC nor nvcc is installed", allow_module_level=True)


def _spec(case):
    return case.kernel.specialize(case.inputs, (case.out_shape, case.out_dtype), **case.consts)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_suite_compiles_for_cuda(case) -> None:
    spec = _spec(case)
    ptx = compile_check(spec)
    assert f".entry k_{spec.name}(" in ptx
    assert ".target sm_75" in ptx


BROKEN = 'extern "C" __global__ void k_bad(float *out) { out[0] = undefined_thing; }'


def test_a_broken_kernel_raises_with_the_nvrtc_log(monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE_DIR", "off")
    with pytest.raises(KernelCompileError) as info:
        compiler.compile_ptx(BROKEN, what="k_bad")
    assert 'identifier "undefined_thing" is undefined' in info.value.log
    assert info.value.source == BROKEN
    assert "--- compiler log ---" in str(info.value)


def test_a_broken_rendering_is_reported_through_compile_check(monkeypatch) -> None:
    """compile_check surfaces the compiler's log for the kernel it rendered."""
    from spawnml_backend_cuda import backend

    monkeypatch.setattr(backend, "render", lambda k: render(k).replace("return;", "return 1;", 1))
    with pytest.raises(KernelCompileError, match="NVRTC could not compile relu") as info:
        compile_check(_spec(next(c for c in CASES if c.kernel.name == "relu")))
    assert "error" in info.value.log


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_is_the_fallback_without_nvrtc(monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE_DIR", "off")
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: None)
    case = next(c for c in CASES if c.kernel.name == "fma_f16")
    ptx = compiler.compile_ptx(render(_spec(case)), what="fma_f16")
    assert ".entry k_fma_f16(" in ptx
    with pytest.raises(KernelCompileError, match="nvcc could not compile") as info:
        compiler.compile_ptx(BROKEN, what="k_bad")
    assert "undefined_thing" in info.value.log
