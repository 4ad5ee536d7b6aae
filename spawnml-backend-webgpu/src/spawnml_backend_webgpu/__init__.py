"""spawnml's webgpu backend: WGSL compute shaders on a WebGPU adapter through wgpu-py."""

from .backend import WebGPUBackend

__all__ = ["WebGPUBackend"]
