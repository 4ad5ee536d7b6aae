"""The webgpu plugin and probe."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spawnml.backend import DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.pending import PendingRuntime
from spawnml.plugins import PluginManager
from spawnml_backend_webgpu import WebGPUBackend
from spawnml_backend_webgpu.probe import NO_ADAPTER, probe


@pytest.fixture
def reprobe():
    probe.cache_clear()
    yield probe
    probe.cache_clear()


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"webgpu"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [WebGPUBackend]


def test_probe_is_consistent_and_cached() -> None:
    info = WebGPUBackend.probe()
    assert WebGPUBackend.probe() is info
    if info.available:
        assert " via " in info.device  # "<adapter> (<type>) via Vulkan"
        software = any(s in info.device for s in ("llvmpipe", "SwiftShader", "(CPU)"))
        assert (info.device_kind is DeviceKind.EMULATED) == software
    else:
        assert info.reason and info.device_kind is DeviceKind.NONE


def test_without_wgpu(reprobe, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wgpu", None)
    assert reprobe().reason == "wgpu is not installed"


def test_without_any_adapter() -> None:
    """No Vulkan driver and no EGL vendor: wgpu finds no adapter, and the reason says so."""
    code = "from spawnml_backend_webgpu.probe import probe; print(probe().reason)"
    env = {
        **os.environ,
        "VK_ICD_FILENAMES": "/nonexistent/icd.json",
        "VK_DRIVER_FILES": "/nonexistent/icd.json",
        "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl.json",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith(NO_ADAPTER)


@pytest.mark.skipif(not issubclass(WebGPUBackend, PendingRuntime), reason="the runtime has landed")
def test_a_pending_runtime_says_so_instead_of_faking() -> None:
    with pytest.raises(BackendUnavailableError, match=r"webgpu runtime is not implemented yet"):
        WebGPUBackend()
