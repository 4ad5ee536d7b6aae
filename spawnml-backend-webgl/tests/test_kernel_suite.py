"""The kernel suite on the webgl backend (Mesa llvmpipe, a real OpenGL ES 3.0 context)."""

from __future__ import annotations

import pytest

from spawnml.testing.kernel_suite import CASES, KernelCase, check_case, unsupported_reason
from spawnml_backend_webgl import WebGLBackend


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_case(backend: WebGLBackend, case: KernelCase) -> None:
    reason = unsupported_reason(backend, case)
    if reason:
        pytest.skip(reason)
    check_case(backend, case)


@pytest.fixture(scope="module")
def constrained() -> WebGLBackend:
    """The lowest limits: 8-texel rows and one texture unit, so every input is packed."""
    if not WebGLBackend.probe().available:
        pytest.skip(WebGLBackend.probe().reason)
    return WebGLBackend(texture_width=8, max_texture_units=1)


SAMPLE = [c for c in CASES if c.name.startswith(("conv2d", "concat", "gather", "softmax", "add_"))]


@pytest.mark.parametrize("case", SAMPLE, ids=[c.name for c in SAMPLE])
def test_kernel_case_with_wrapped_rows_and_packed_inputs(constrained: WebGLBackend, case) -> None:
    reason = unsupported_reason(constrained, case)
    if reason:
        pytest.skip(reason)
    check_case(constrained, case)
