"""The few CUDA driver API calls the probe needs, through ctypes (no pycuda required to look)."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from spawnml.errors import BackendUnavailableError

LIBCUDA = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR


@dataclass(frozen=True)
class CudaDevice:
    """What the driver says about device 0."""

    name: str
    compute_capability: tuple[int, int]
    total_bytes: int
    driver_version: int  # e.g. 13000 for CUDA 13.0
    count: int

    def describe(self) -> str:
        major, minor = self.compute_capability
        driver = f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}"
        more = f", {self.count} devices" if self.count > 1 else ""
        return (
            f"{self.name} (compute {major}.{minor}, {self.total_bytes / 2**30:.0f} GiB, "
            f"driver CUDA {driver}{more})"
        )


def load_driver(path: str | None = None) -> ctypes.CDLL:
    """The NVIDIA driver library (raises when there is none)."""
    path = path or LIBCUDA
    try:
        return ctypes.CDLL(path)
    except OSError:
        raise BackendUnavailableError(f"{path} not found: no NVIDIA driver") from None


def _check(lib: ctypes.CDLL, call: str, result: int) -> None:
    if result == 0:
        return
    name = ctypes.c_char_p()
    lookup = getattr(lib, "cuGetErrorName", None)
    if lookup is None or lookup(result, ctypes.byref(name)) != 0 or not name.value:
        raise BackendUnavailableError(f"{call} failed with CUDA error {result}")
    raise BackendUnavailableError(f"{call} failed: {name.value.decode()}")


def first_device(lib: ctypes.CDLL) -> CudaDevice:
    """Initialise the driver, describe device 0, retain and release its primary context."""
    c_int, c_size = ctypes.c_int, ctypes.c_size_t
    _check(lib, "cuInit", lib.cuInit(0))
    version, count, device = c_int(), c_int(), c_int()
    _check(lib, "cuDriverGetVersion", lib.cuDriverGetVersion(ctypes.byref(version)))
    _check(lib, "cuDeviceGetCount", lib.cuDeviceGetCount(ctypes.byref(count)))
    if count.value < 1:
        raise BackendUnavailableError("the NVIDIA driver found no CUDA device")
    _check(lib, "cuDeviceGet", lib.cuDeviceGet(ctypes.byref(device), 0))
    name = ctypes.create_string_buffer(256)
    _check(lib, "cuDeviceGetName", lib.cuDeviceGetName(name, len(name), device))
    major, minor, total = c_int(), c_int(), c_size()
    _check(
        lib,
        "cuDeviceGetAttribute",
        lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, device),
    )
    _check(
        lib,
        "cuDeviceGetAttribute",
        lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, device),
    )
    _check(lib, "cuDeviceTotalMem", lib.cuDeviceTotalMem_v2(ctypes.byref(total), device))
    context = ctypes.c_void_p()
    _check(
        lib, "cuDevicePrimaryCtxRetain", lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    )
    _check(lib, "cuDevicePrimaryCtxRelease", lib.cuDevicePrimaryCtxRelease_v2(device))
    return CudaDevice(
        name=name.value.decode(errors="replace"),
        compute_capability=(major.value, minor.value),
        total_bytes=total.value,
        driver_version=version.value,
        count=count.value,
    )
