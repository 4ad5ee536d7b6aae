"""spawnml's opencl backend.

OpenCL C kernels on any OpenCL device (GPUs, PoCL on CPUs) through pyopencl.
"""

from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
