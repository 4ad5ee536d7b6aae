"""Finds a WebGPU adapter through wgpu-py and creates a device on it (wgpu imported lazily)."""

from __future__ import annotations

from typing import Any

from spawnml.backend import BackendInfo, DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.probing import (
    available,
    cached_probe,
    ensure_xdg_runtime_dir,
    gpu_or_emulated,
    import_failure,
    unavailable,
)

NAME = "webgpu"
NO_ADAPTER = (
    "no Vulkan/Metal/DX12 adapter (nor an OpenGL fallback) found; on Linux without a GPU "
    "install lavapipe (Debian: mesa-vulkan-drivers)"
)


def request_adapter() -> Any:
    """The high-performance adapter wgpu offers (raises when there is none)."""
    ensure_xdg_runtime_dir()
    try:
        import wgpu
    except ImportError as exc:
        raise BackendUnavailableError(import_failure(exc, "wgpu")) from None
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except (RuntimeError, wgpu.GPUError) as exc:  # wgpu-native: "No suitable graphics adapter"
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = lines[-1] if lines else repr(exc)
        raise BackendUnavailableError(f"{NO_ADAPTER} (wgpu: {detail})") from None
    if adapter is None:
        raise BackendUnavailableError(NO_ADAPTER)
    return adapter


def adapter_kind(adapter: Any) -> DeviceKind:
    """GPU for discrete/integrated GPUs, EMULATED for CPU adapters (lavapipe, SwiftShader)."""
    info = adapter.info
    return gpu_or_emulated(
        info.get("device", ""),
        info.get("description", ""),
        is_cpu_device=info.get("adapter_type", "") == "CPU",
    )


@cached_probe(NAME)
def probe() -> BackendInfo:
    """Import wgpu, request an adapter, create and destroy a device on it."""
    try:
        adapter = request_adapter()
    except BackendUnavailableError as exc:
        return unavailable(NAME, str(exc))
    device = adapter.request_device_sync()
    device.destroy()
    return available(NAME, adapter.summary, adapter_kind(adapter))
