"""Shared fixtures: one webgl backend per session, skipped with the probe's reason."""

from __future__ import annotations

import pytest

from spawnml_backend_webgl import WebGLBackend


@pytest.fixture(scope="session")
def backend() -> WebGLBackend:
    info = WebGLBackend.probe()
    if not info.available:
        pytest.skip(f"webgl unavailable: {info.reason}")
    return WebGLBackend()
