"""spawnml's cuda backend.

CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU).
"""

from .backend import CUDABackend
from .probe import probe

__all__ = ["CUDABackend", "probe"]
