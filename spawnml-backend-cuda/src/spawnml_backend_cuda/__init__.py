"""spawnml's cuda backend.

CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU).
``compile_check(kernel_ir)`` renders and compiles a kernel to PTX without a GPU.
"""

from .backend import CUDABackend, compile_check

__all__ = ["CUDABackend", "compile_check"]
