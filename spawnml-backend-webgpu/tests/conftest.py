"""Shared fixtures: one backend on the process-wide device, skipped with the probe's reason."""

from __future__ import annotations

import pytest

from spawnml.probing import ensure_xdg_runtime_dir
from spawnml_backend_webgpu import WebGPUBackend


@pytest.fixture(scope="session")
def backend() -> WebGPUBackend:
    ensure_xdg_runtime_dir()
    info = WebGPUBackend.probe()
    if not info.available:
        pytest.skip(f"webgpu unavailable: {info.reason}")
    return WebGPUBackend()
