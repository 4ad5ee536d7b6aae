"""The process's one OpenCL context and in-order queue, and program building with caches."""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from spawnml.errors import KernelCompileError
from spawnml.kernel.disk_cache import KernelDiskCache

from .probe import _import_pyopencl, describe, select_device


@dataclass(frozen=True)
class Runtime:
    """Context, device and queue shared by every OpenCLBackend in this process."""

    cl: Any  # the pyopencl module
    context: Any
    device: Any
    queue: Any

    @property
    def fp16(self) -> bool:
        return "cl_khr_fp16" in self.device.extensions.split()

    @property
    def identity(self) -> str:
        """What decides a program binary: device, platform and driver versions."""
        d = self.device
        return f"{d.name}|{d.platform.name}|{d.platform.version}|{d.driver_version}"


_lock = threading.Lock()


@functools.cache
def _create() -> Runtime:
    cl = _import_pyopencl()
    context, device = select_device()
    return Runtime(cl, context, device, cl.CommandQueue(context, device))


def runtime() -> Runtime:
    """The shared runtime, created on first use (raises BackendUnavailableError)."""
    with _lock:  # two threads must not each create a context
        return _create()


_disk = KernelDiskCache("opencl", "bin")


def build(rt: Runtime, source: str, what: str) -> Any:
    """A built ``cl.Program`` for ``source``: from the on-disk binary cache when possible."""
    cl = rt.cl
    key = (hashlib.sha256(source.encode()).hexdigest(), rt.identity)
    binary = _disk.get(*key)
    if binary is not None:
        try:
            return cl.Program(rt.context, [rt.device], [binary]).build()
        except cl.Error:
            pass  # a stale or foreign binary: rebuild from source below
    try:
        program = cl.Program(rt.context, source).build()
    except cl.Error as exc:
        raise KernelCompileError(
            f"OpenCL C build of {what} failed on {describe(rt.device)}",
            source=source,
            log=_build_log(str(exc)),
        ) from None
    _disk.put(program.get_info(cl.program_info.BINARIES)[0], *key)
    return program


def _build_log(message: str) -> str:
    """The compiler's own log from pyopencl's error text (it follows "Build on <device>:")."""
    _, found, rest = message.partition("Build on ")
    if not found:
        return message.strip()
    return rest.partition(":\n")[2].split("\n(options:")[0].strip()
