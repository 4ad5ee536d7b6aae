"""What backend probes share: per-process caching, never raising, reasons, device kinds.

A probe checks a runtime for real (import the library, enumerate devices, create and release
a context) and answers with a :class:`~spawnml.backend.BackendInfo`. These helpers keep the
probes of the backend packages short and their reasons worded alike.
"""

from __future__ import annotations

import functools
import os
import platform
import stat
import tempfile
from collections.abc import Callable

from .backend import BackendInfo, DeviceKind

ProbeFunction = Callable[[], BackendInfo]

# Names of software implementations behind GPU-style APIs, as their drivers report them.
_SOFTWARE_DEVICE_MARKERS = (
    "llvmpipe",
    "lavapipe",
    "softpipe",
    "swiftshader",
    "pocl",
    "microsoft basic render",
)


def cached_probe(name: str) -> Callable[[ProbeFunction], ProbeFunction]:
    """Run the decorated probe once per process; an exception becomes an unavailable result.

    The decorated function keeps ``cache_clear()`` (tests use it to probe again).
    """

    def decorate(fn: ProbeFunction) -> ProbeFunction:
        @functools.wraps(fn)
        def guarded() -> BackendInfo:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - a probe reports, it never raises
                return unavailable(name, f"probe failed: {type(exc).__name__}: {exc}")

        return functools.cache(guarded)

    return decorate


def unavailable(name: str, reason: str) -> BackendInfo:
    """The answer of a probe that found no usable runtime or device."""
    return BackendInfo(name=name, available=False, reason=reason, device_kind=DeviceKind.NONE)


def available(name: str, device: str, kind: DeviceKind) -> BackendInfo:
    """The answer of a probe that created a context on ``device``."""
    return BackendInfo(name=name, available=True, device=device, device_kind=kind)


def import_failure(exc: ImportError, module: str) -> str:
    """The reason for a failed ``import module``: not installed, or installed but broken."""
    missing = (getattr(exc, "name", None) or "").split(".")[0]
    if isinstance(exc, ModuleNotFoundError) and missing == module.split(".")[0]:
        return f"{module} is not installed"
    return f"{module} failed to import: {exc}"


def is_software_device(*descriptions: str) -> bool:
    """Whether a device description names a CPU/software implementation (llvmpipe, PoCL...)."""
    text = " ".join(descriptions).lower()
    return any(marker in text for marker in _SOFTWARE_DEVICE_MARKERS)


def gpu_or_emulated(*descriptions: str, is_cpu_device: bool = False) -> DeviceKind:
    """GPU for a hardware accelerator, EMULATED for a CPU or software implementation."""
    if is_cpu_device or is_software_device(*descriptions):
        return DeviceKind.EMULATED
    return DeviceKind.GPU


@functools.cache
def cpu_model() -> str:
    """The host CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def ensure_xdg_runtime_dir() -> None:
    """Give Mesa a private XDG_RUNTIME_DIR when none is set.

    Mesa's Vulkan and EGL drivers print "XDG_RUNTIME_DIR is invalid or not set" to stderr
    on every context creation otherwise (harmless, but it garbles CLI output).
    """
    current = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.name != "posix" or (current and os.path.isdir(current)):
        return
    path = os.path.join(tempfile.gettempdir(), f"spawnml-runtime-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        return  # someone else's or shared: leave the environment alone
    os.environ["XDG_RUNTIME_DIR"] = path
