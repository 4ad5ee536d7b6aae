"""The webgpu backend: WGSL compute shaders on a WebGPU adapter through wgpu-py."""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.pending import PendingRuntime

from .probe import probe


class WebGPUBackend(PendingRuntime):
    """WGSL compute shaders on a WebGPU adapter through wgpu-py."""

    name = "webgpu"
    # The probe is real; the runtime (buffers, compile, launch) is issue #5. Until then
    # constructing this class raises BackendUnavailableError saying so, instead of faking.
    runtime_issue = "issue #5"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()
