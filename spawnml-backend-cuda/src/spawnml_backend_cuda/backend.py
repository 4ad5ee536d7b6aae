"""The cuda backend.

CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU).
"""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.pending import PendingRuntime

from .probe import probe


class CUDABackend(PendingRuntime):
    """CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU)."""

    name = "cuda"
    # The probe is real; the runtime (buffers, compile, launch) is issue #4. Until then
    # constructing this class raises BackendUnavailableError saying so, instead of faking.
    runtime_issue = "issue #4"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()
