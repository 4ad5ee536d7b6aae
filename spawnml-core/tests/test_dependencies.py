"""Acceptance: core + the cpu backend pull in no backend's native library (real resolution)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NATIVE = {"wgpu", "pyopencl", "pycuda", "wasmtime", "moderngl", "glcontext", "cuda-bindings"}


def resolve(tmp_path: Path, repo: Path, *projects: str) -> set[str]:
    """What ``pip install`` would install into an empty environment (nothing installed)."""
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), *(str(repo / p) for p in projects)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower().replace("_", "-") for item in installs}


def test_core_and_cpu_install_no_native_backend_library(tmp_path: Path, repo_root: Path) -> None:
    names = resolve(tmp_path, repo_root, "spawnml-core", "spawnml-backend-cpu")
    assert {"spawnml-core", "spawnml-backend-cpu", "numpy", "pluggy"} <= names
    assert not names & NATIVE, names & NATIVE


def test_a_backend_brings_its_own_native_library(tmp_path: Path, repo_root: Path) -> None:
    """The check above can fail: resolving the wasm backend does bring wasmtime."""
    names = resolve(tmp_path, repo_root, "spawnml-core", "spawnml-backend-wasm")
    assert names & NATIVE == {"wasmtime"}
