"""docs/kernels.md shows what the renderers print today (generated, never hand-copied)."""

from __future__ import annotations

import pytest

from spawnml import get_available_backends
from spawnml.testing.kernel_docs import (
    TARGETS,
    doc_path,
    rendered,
    replace_section,
    tiled_gemm_section,
)


def test_the_tiled_gemm_listings_are_what_the_renderers_print():
    missing = [t for t in ("webgpu", "opencl", "webgl") if t not in get_available_backends()]
    if missing:
        pytest.skip(f"backends not available here: {missing}")
    pytest.importorskip("spawnml_backend_cuda.backend")
    doc = doc_path().read_text()
    section = tiled_gemm_section({t: rendered(t) for t in TARGETS})
    assert replace_section(doc, section) == doc, "run scripts/gen_kernel_docs.py"
    assert section.count("```c") == 4
