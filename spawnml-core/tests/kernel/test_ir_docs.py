"""docs/writing-a-backend.md's IR reference is what the code says (generated, never hand-copied)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen_ir_docs.py"

# The renderers whose declared native intrinsics the table shows (importable without a device).
RENDERERS = (
    "spawnml_backend_cpu.executor",
    "spawnml_backend_opencl.renderer",
    "spawnml_backend_cuda.renderer",
    "spawnml_backend_webgpu.renderer",
    "spawnml_backend_webgl.renderer",
    "spawnml_backend_wasm.wat",
)


def test_the_ir_table_in_writing_a_backend_is_current():
    if not SCRIPT.exists():
        pytest.skip("not a checkout of the monorepo")
    for module in RENDERERS:
        pytest.importorskip(module)
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_ir_operator_is_in_the_table():
    doc = (ROOT / "docs" / "writing-a-backend.md").read_text()
    from spawnml.kernel import ir
    from spawnml.kernel.intrinsics import INTRINSICS

    start, end = doc.index("<!-- ir-table:start -->"), doc.index("<!-- ir-table:end -->")
    table = doc[start:end]
    for name in [op.value for op in ir.Op] + list(INTRINSICS):
        assert f"| `{name}` |" in table, name
