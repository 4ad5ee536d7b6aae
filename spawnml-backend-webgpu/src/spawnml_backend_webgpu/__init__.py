"""spawnml's webgpu backend: WGSL compute shaders on a WebGPU adapter through wgpu-py."""

from .backend import WebGPUBackend
from .probe import probe

__all__ = ["WebGPUBackend", "probe"]
