"""The webgl backend: GLSL ES 3.00 shaders on an OpenGL ES 3.0 context (the WebGL2 feature set)."""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.pending import PendingRuntime

from .probe import probe


class WebGLBackend(PendingRuntime):
    """GLSL ES 3.00 shaders on an OpenGL ES 3.0 context (the WebGL2 feature set)."""

    name = "webgl"
    # The probe is real; the runtime (buffers, compile, launch) is issue #6. Until then
    # constructing this class raises BackendUnavailableError saying so, instead of faking.
    runtime_issue = "issue #6"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()
