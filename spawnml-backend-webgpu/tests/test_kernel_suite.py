"""The kernel suite on WebGPU: every case, excluded only through declared capabilities."""

from __future__ import annotations

import pytest

from spawnml.testing.kernel_suite import CASES, check_case, unsupported_reason
from spawnml_backend_webgpu import WebGPUBackend


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_case(backend: WebGPUBackend, case) -> None:
    reason = unsupported_reason(backend, case)
    if reason:
        pytest.skip(reason)
    check_case(backend, case)


@pytest.fixture(scope="module")
def emulated_f16(backend: WebGPUBackend) -> WebGPUBackend:
    """The same device with float16 stored as f32 (what adapters without shader-f16 get)."""
    return WebGPUBackend(backend.ctx.device, native_f16=False)


F16_CASES = [c for c in CASES if "f16" in c.name]


@pytest.mark.parametrize("case", F16_CASES, ids=[c.name for c in F16_CASES])
def test_f16_cases_with_f32_storage(emulated_f16: WebGPUBackend, case) -> None:
    assert not emulated_f16.capabilities.float16_arithmetic
    check_case(emulated_f16, case)
