"""Fixtures: one OpenCLBackend per test session, skipped with the probe's reason."""

from __future__ import annotations

import pytest

from spawnml_backend_opencl import OpenCLBackend


@pytest.fixture(scope="session")
def opencl() -> OpenCLBackend:
    info = OpenCLBackend.probe()
    if not info.available:
        pytest.skip(f"no OpenCL device: {info.reason}")
    return OpenCLBackend()
