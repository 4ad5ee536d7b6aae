"""Finds the NVIDIA driver and a device; says whether NVRTC can compile-check without one."""

from __future__ import annotations

import importlib.util

from spawnml.backend import BackendInfo, DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.probing import available, cached_probe, unavailable

from . import driver

NAME = "cuda"


def nvrtc_version() -> str | None:
    """NVRTC's version ("13.0") when cuda-bindings can load it, else None."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    try:
        result, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # noqa: BLE001 - a missing libnvrtc surfaces as various loader errors
        return None
    return f"{major}.{minor}" if result == nvrtc.nvrtcResult.NVRTC_SUCCESS else None


def pycuda_installed() -> bool:
    """Whether pycuda, the runtime's driver binding, is installed (without importing it)."""
    return importlib.util.find_spec("pycuda") is not None


def _nvrtc_note() -> str:
    version = nvrtc_version()
    if version is None:
        return "NVRTC is not installed either, so CUDA kernels cannot be compile-checked"
    return f"NVRTC {version} is installed: CUDA kernels can still be compile-checked"


@cached_probe(NAME)
def probe() -> BackendInfo:
    """Load libcuda, init the driver, describe device 0, retain and release its context."""
    try:
        device = driver.first_device(driver.load_driver())
    except BackendUnavailableError as exc:
        return unavailable(NAME, f"{exc} ({_nvrtc_note()})")
    if not pycuda_installed():
        return unavailable(
            NAME,
            f"found {device.describe()}, but pycuda is not installed: "
            "pip install 'spawnml-backend-cuda[gpu]' (it builds against the CUDA toolkit)",
        )
    return available(NAME, device.describe(), DeviceKind.GPU)
