"""The WebGPU device a process computes on: chosen once, shared by every backend instance.

``SPAWNML_WEBGPU_ADAPTER`` picks an adapter by a substring of its name (e.g. ``llvmpipe``,
``OpenGL``); otherwise wgpu's choice for the power preference. An application may pass a
device it created itself, so several models (and its own rendering) share one device.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from spawnml.errors import BackendUnavailableError

from .probe import request_adapter

ADAPTER_ENV = "SPAWNML_WEBGPU_ADAPTER"
# Limits worth raising to the adapter's maximum when spawnml creates the device itself.
_WANTED_LIMITS = (
    "max-storage-buffers-per-shader-stage",
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroups-per-dimension",
)


@dataclass
class DeviceContext:
    """A device, its queue and what every backend on it shares: pipelines and the batch."""

    device: Any
    adapter_summary: str
    pipelines: dict[str, Any] = field(default_factory=dict)
    encoder: Any = None  # the open command encoder collecting launches, or None
    launches: int = 0  # dispatches in the open encoder
    keep_alive: list[Any] = field(default_factory=list)  # scratch buffers of the open batch
    fence: Any = None  # a 4-byte buffer whose read waits for all submitted work
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def limits(self) -> dict[str, int]:
        return self.device.limits

    @property
    def f16(self) -> bool:
        return "shader-f16" in self.device.features


_SHARED: dict[tuple[str, str], DeviceContext] = {}
_SHARED_LOCK = threading.Lock()


def _pick_adapter(power_preference: str) -> Any:
    wanted = os.environ.get(ADAPTER_ENV, "").strip()
    if not wanted:
        if power_preference == "high-performance":
            return request_adapter()
        import wgpu

        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise BackendUnavailableError(f"no WebGPU adapter for {power_preference!r}")
        return adapter
    request_adapter()  # same import/driver checks and messages as the probe
    import wgpu

    adapters = wgpu.gpu.enumerate_adapters_sync()
    for adapter in adapters:
        if wanted.lower() in adapter.summary.lower():
            return adapter
    names = "; ".join(a.summary for a in adapters) or "none"
    raise BackendUnavailableError(f"{ADAPTER_ENV}={wanted!r} matches no adapter (found: {names})")


def create_device(adapter: Any) -> Any:
    """A device with shader-f16 when offered and the adapter's best values of our limits."""
    # timestamp-query: profiles time kernels on the device (WebGPUBackend.device_timing).
    features = [f for f in ("shader-f16", "timestamp-query") if f in adapter.features]
    limits = {name: adapter.limits[name] for name in _WANTED_LIMITS if name in adapter.limits}
    return adapter.request_device_sync(required_features=features, required_limits=limits)


def shared_context(power_preference: str = "high-performance") -> DeviceContext:
    """The process-wide device for this adapter choice (created on first use)."""
    key = (os.environ.get(ADAPTER_ENV, ""), power_preference)
    with _SHARED_LOCK:
        ctx = _SHARED.get(key)
        if ctx is None:
            adapter = _pick_adapter(power_preference)
            ctx = _SHARED[key] = DeviceContext(create_device(adapter), adapter.summary)
        return ctx


_BY_DEVICE: dict[int, DeviceContext] = {}


def context_for(device: Any) -> DeviceContext:
    """The context of a device the application created (one per device, so shared)."""
    with _SHARED_LOCK:
        for ctx in _SHARED.values():
            if ctx.device is device:
                return ctx
        ctx = _BY_DEVICE.get(id(device))
        if ctx is None or ctx.device is not device:
            summary = getattr(device, "adapter", None)
            summary = getattr(summary, "summary", "") if summary is not None else ""
            ctx = _BY_DEVICE[id(device)] = DeviceContext(device, summary)
        return ctx
