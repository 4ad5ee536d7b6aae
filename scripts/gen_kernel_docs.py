#!/usr/bin/env python3
"""Regenerate the generated section of docs/kernels.md (the tiled GEMM on every target).

    .venv/bin/python scripts/gen_kernel_docs.py

Needs the webgpu and webgl backends (lavapipe, Mesa EGL) and the cuda package (its renderer,
no GPU). ``spawnml-core/tests/kernel/test_kernel_docs.py`` fails when the file and the
renderers disagree.
"""

from __future__ import annotations

from spawnml.testing.kernel_docs import (
    TARGETS,
    doc_path,
    rendered,
    replace_section,
    tiled_gemm_section,
)


def main() -> None:
    path = doc_path()
    section = tiled_gemm_section({t: rendered(t) for t in TARGETS})
    path.write_text(replace_section(path.read_text(), section))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
