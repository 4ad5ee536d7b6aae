"""Finds an OpenCL device that can build a kernel (pyopencl is imported only here, lazily)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from spawnml.backend import BackendInfo, DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.probing import available, cached_probe, gpu_or_emulated, import_failure, unavailable

if TYPE_CHECKING:
    import pyopencl as cl

NAME = "opencl"
NO_PLATFORM = (
    "no OpenCL platform found: install an OpenCL driver (ICD), e.g. Debian's pocl-opencl-icd"
)
# Building a kernel, not only creating a context, catches drivers that enumerate but cannot
# compile (a PoCL whose LLVM does not know the host CPU fails exactly this way).
_PROBE_KERNEL = "__kernel void probe(__global float *x) { x[get_global_id(0)] += 1.0f; }"


def _import_pyopencl() -> Any:
    try:
        import pyopencl
    except ImportError as exc:
        raise BackendUnavailableError(import_failure(exc, "pyopencl")) from None
    return pyopencl


def _candidates(cl: Any) -> list[cl.Device]:
    """Every device of every platform, hardware GPUs first."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # the ICD loader says PLATFORM_NOT_FOUND_KHR when it finds no driver
        platforms = []
    if not platforms:
        raise BackendUnavailableError(NO_PLATFORM)
    devices = []
    for platform in platforms:
        try:
            devices += platform.get_devices()
        except cl.Error:  # DEVICE_NOT_FOUND: a platform without devices
            continue
    if not devices:
        names = ", ".join(p.name for p in platforms)
        raise BackendUnavailableError(f"no OpenCL device found on platform(s) {names}")
    return sorted(devices, key=lambda d: device_kind(cl, d) is not DeviceKind.GPU)


def device_kind(cl: Any, device: cl.Device) -> DeviceKind:
    """GPU for a hardware GPU, EMULATED for a CPU device (PoCL, vendor CPU runtimes)."""
    return gpu_or_emulated(
        device.name, device.platform.name, is_cpu_device=bool(device.type & cl.device_type.CPU)
    )


def _chosen(cl: Any, devices: list[cl.Device]) -> list[cl.Device]:
    """The devices ``SPAWNML_OPENCL_DEVICE`` selects: an index into the candidate list or a
    case-insensitive part of the device or platform name (all devices when unset)."""
    choice = os.environ.get("SPAWNML_OPENCL_DEVICE", "").strip()
    if not choice:
        return devices
    if choice.isdigit():
        picked = devices[int(choice) : int(choice) + 1]
    else:
        picked = [d for d in devices if choice.lower() in f"{d.name} {d.platform.name}".lower()]
    if not picked:
        names = "; ".join(f"{i}: {describe(d)}" for i, d in enumerate(devices))
        raise BackendUnavailableError(
            f"SPAWNML_OPENCL_DEVICE={choice!r} matches no OpenCL device (found {names})"
        )
    return picked


def select_device() -> tuple[cl.Context, cl.Device]:
    """A context on the first device that builds a trivial kernel (hardware GPUs first)."""
    cl = _import_pyopencl()
    failures = []
    for device in _chosen(cl, _candidates(cl)):
        try:
            context = cl.Context([device])
            cl.Program(context, _PROBE_KERNEL).build()
        except cl.Error as exc:
            failures.append(f"{device.name}: {str(exc).strip().splitlines()[0]}")
            continue
        return context, device
    raise BackendUnavailableError("no OpenCL device could build a kernel: " + "; ".join(failures))


def describe(device: cl.Device) -> str:
    """A one-line device description: name, platform, OpenCL version."""
    version = " ".join(device.version.split()[:2])  # "OpenCL 3.0"
    return f"{device.name.strip()} ({device.platform.name.strip()}, {version})"


@cached_probe(NAME)
def probe() -> BackendInfo:
    """Import pyopencl, enumerate platforms and devices, build a kernel on the chosen one."""
    try:
        _context, device = select_device()
    except BackendUnavailableError as exc:
        return unavailable(NAME, str(exc))
    return available(NAME, describe(device), device_kind(_import_pyopencl(), device))
