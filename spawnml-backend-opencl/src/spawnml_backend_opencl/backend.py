"""The opencl backend.

OpenCL C kernels on any OpenCL device (GPUs, PoCL on CPUs) through pyopencl.
"""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.pending import PendingRuntime

from .probe import probe


class OpenCLBackend(PendingRuntime):
    """OpenCL C kernels on any OpenCL device (GPUs, PoCL on CPUs) through pyopencl."""

    name = "opencl"
    # The probe is real; the runtime (buffers, compile, launch) is issue #4. Until then
    # constructing this class raises BackendUnavailableError saying so, instead of faking.
    runtime_issue = "issue #4"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()
