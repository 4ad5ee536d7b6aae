"""The kernel suite on OpenCL, with the CPU's tolerances; exclusions only from capabilities."""

from __future__ import annotations

import pytest

from spawnml.dtypes import DType
from spawnml.testing.kernel_suite import CASES, check_case, unsupported_reason
from spawnml_backend_opencl import OpenCLBackend


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_suite_on_opencl(opencl: OpenCLBackend, case) -> None:
    reason = unsupported_reason(opencl, case)
    if reason:
        pytest.skip(reason)
    check_case(opencl, case)


def _uses_f16(case) -> bool:
    inputs = case.inputs.values()
    return case.out_dtype is DType.float16 or any(a.dtype.name == "float16" for a in inputs)


F16_CASES = [c for c in CASES if _uses_f16(c)]


@pytest.fixture(scope="module")
def opencl_f32_math(opencl: OpenCLBackend) -> OpenCLBackend:
    """f16 computed as f32 and rounded on store, whether or not the device has cl_khr_fp16."""
    return OpenCLBackend(fp16=False)


@pytest.mark.parametrize("case", F16_CASES, ids=[c.name for c in F16_CASES])
def test_float16_without_cl_khr_fp16(opencl_f32_math: OpenCLBackend, case) -> None:
    assert not opencl_f32_math.capabilities.float16_arithmetic
    check_case(opencl_f32_math, case)


def test_the_suite_covers_float16() -> None:
    assert F16_CASES, "the kernel suite has no float16 case; this module would test nothing"
