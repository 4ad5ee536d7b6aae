"""The process's CUDA context (device 0's primary context) and stream, through pycuda."""

from __future__ import annotations

import atexit
import functools
import os
import threading
from dataclasses import dataclass
from typing import Any

from spawnml.errors import BackendUnavailableError


@dataclass(frozen=True)
class Runtime:
    """pycuda's driver module, the device, its primary context and one stream."""

    cuda: Any  # pycuda.driver
    device: Any
    context: Any
    stream: Any

    @property
    def compute_capability(self) -> tuple[int, int]:
        return tuple(self.device.compute_capability())  # type: ignore[return-value]


_lock = threading.Lock()


@functools.cache
def _create() -> Runtime:
    try:
        import pycuda.driver as cuda
    except ImportError as exc:  # no pycuda, or pycuda without libcuda.so.1
        raise BackendUnavailableError(f"pycuda cannot be loaded: {exc}") from None
    cuda.init()
    index = int(os.environ.get("SPAWNML_CUDA_DEVICE", "0"))
    if index >= cuda.Device.count():
        raise BackendUnavailableError(
            f"SPAWNML_CUDA_DEVICE={index}, but the driver found {cuda.Device.count()} device(s)"
        )
    device = cuda.Device(index)
    # The primary context is the one the CUDA runtime and other libraries share; it is made
    # current on the creating thread (pycuda contexts are per thread).
    context = device.retain_primary_context()
    context.push()
    atexit.register(_pop, context)
    return Runtime(cuda, device, context, cuda.Stream())


def _pop(context: Any) -> None:
    try:
        context.pop()
    except Exception:  # noqa: BLE001 - the driver may already be shutting down at exit
        pass


def runtime() -> Runtime:
    """The shared runtime, created on first use (raises BackendUnavailableError)."""
    with _lock:
        return _create()
