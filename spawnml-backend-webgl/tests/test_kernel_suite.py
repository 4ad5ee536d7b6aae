"""The kernel suite on the webgl backend (Mesa llvmpipe, a real OpenGL ES 3.0 context)."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.testing.kernel_suite import CASES, KernelCase, check_case, unsupported_reason
from spawnml_backend_webgl import WebGLBackend


def flushed_denormals_reason(backend: WebGLBackend, case: KernelCase) -> str | None:
    """GLSL ES 3.00 (4.5.1) lets shaders flush subnormal floats to zero and llvmpipe does;
    the backend declares it (``extras["flushes_denormals"]``), so cases whose float inputs
    hold subnormals cannot match a reference that keeps them."""
    if not backend.capabilities.extras.get("flushes_denormals"):
        return None
    tiny = np.finfo(np.float32).tiny
    for name, array in case.inputs.items():
        a = np.asarray(array)
        if a.dtype.kind == "f" and np.any((a != 0) & (np.abs(a) < tiny)):
            return f"input {name!r} holds subnormal floats; {backend.name} flushes them to zero"
    return None


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_case(backend: WebGLBackend, case: KernelCase) -> None:
    reason = unsupported_reason(backend, case) or flushed_denormals_reason(backend, case)
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
    reason = unsupported_reason(constrained, case) or flushed_denormals_reason(constrained, case)
    if reason:
        pytest.skip(reason)
    check_case(constrained, case)
