"""The opencl plugin and probe."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spawnml.backend import DeviceKind
from spawnml.plugins import PluginManager
from spawnml_backend_opencl import OpenCLBackend
from spawnml_backend_opencl.probe import NO_PLATFORM, probe


@pytest.fixture
def reprobe():
    """Clear the per-process probe cache before and after the test."""
    probe.cache_clear()
    yield probe
    probe.cache_clear()


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"opencl"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [OpenCLBackend]


def test_probe_is_consistent_and_cached() -> None:
    info = OpenCLBackend.probe()
    assert info.name == "opencl"
    assert OpenCLBackend.probe() is info
    if info.available:
        assert info.device_kind in (DeviceKind.GPU, DeviceKind.EMULATED)
        assert "OpenCL" in info.device
    else:
        assert info.reason and info.device_kind is DeviceKind.NONE


def test_a_cpu_device_is_emulated() -> None:
    info = OpenCLBackend.probe()
    if not info.available or "Portable Computing Language" not in info.device:
        pytest.skip(f"no PoCL device here: {info.device or info.reason}")
    assert info.device_kind is DeviceKind.EMULATED


def test_without_pyopencl(reprobe, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    assert reprobe().reason == "pyopencl is not installed"


def test_without_an_opencl_driver() -> None:
    """The ICD loader finds no driver when pointed at an empty vendors folder."""
    code = "from spawnml_backend_opencl.probe import probe; print(probe().reason)"
    env = {**os.environ, "OCL_ICD_VENDORS": "/nonexistent/vendors"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == NO_PLATFORM


def test_an_unknown_device_choice_is_reported() -> None:
    """SPAWNML_OPENCL_DEVICE names a device; one that matches nothing lists what exists."""
    code = "from spawnml_backend_opencl.probe import probe; print(probe().reason)"
    env = {**os.environ, "SPAWNML_OPENCL_DEVICE": "no-such-device"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    if "no OpenCL platform" in done.stdout:
        pytest.skip(done.stdout.strip())
    expected = "SPAWNML_OPENCL_DEVICE='no-such-device' matches no OpenCL device (found 0: "
    assert expected in done.stdout


def test_a_device_can_be_chosen_by_index() -> None:
    code = (
        "from spawnml_backend_opencl.probe import probe; i = probe(); print(i.available, i.device)"
    )
    env = {**os.environ, "SPAWNML_OPENCL_DEVICE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    info = OpenCLBackend.probe()
    assert done.stdout.strip() == f"{info.available} {info.device}"
