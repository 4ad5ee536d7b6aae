"""The wasm backend: WebAssembly (SIMD128) kernels run by wasmtime."""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.pending import PendingRuntime

from .probe import probe


class WasmBackend(PendingRuntime):
    """WebAssembly (SIMD128) kernels run by wasmtime."""

    name = "wasm"
    # The probe is real; the runtime (buffers, compile, launch) is issue #7. Until then
    # constructing this class raises BackendUnavailableError saying so, instead of faking.
    runtime_issue = "issue #7"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()
