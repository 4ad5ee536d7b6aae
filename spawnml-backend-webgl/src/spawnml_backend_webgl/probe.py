"""Creates a real OpenGL ES 3.0 context (the WebGL2 feature set) over EGL and inits moderngl."""

from __future__ import annotations

from spawnml.backend import BackendInfo
from spawnml.errors import BackendUnavailableError
from spawnml.probing import (
    available,
    cached_probe,
    ensure_xdg_runtime_dir,
    gpu_or_emulated,
    import_failure,
    unavailable,
)

NAME = "webgl"
_ES3 = 300  # moderngl's version code for OpenGL ES 3.0


@cached_probe(NAME)
def probe() -> BackendInfo:
    """Make an ES 3.0 context current, let moderngl load it, read the renderer, release."""
    ensure_xdg_runtime_dir()
    try:
        import moderngl
    except ImportError as exc:
        return unavailable(NAME, import_failure(exc, "moderngl"))
    from .egl import EGLContext

    try:
        egl_context = EGLContext(3, 0)
    except BackendUnavailableError as exc:
        return unavailable(NAME, str(exc))
    try:
        with egl_context:
            # moderngl keeps the last context it created as its default; the runtime creates
            # its own, so this released one is never used again.
            gl = moderngl.create_context(require=_ES3, context=egl_context)
            try:
                version, renderer = gl.info["GL_VERSION"], gl.info["GL_RENDERER"]
            finally:
                gl.release()
    finally:
        egl_context.release()
    if not version.startswith("OpenGL ES 3"):
        return unavailable(NAME, f"EGL gave {version!r}, not an OpenGL ES 3.x context")
    return available(NAME, f"{renderer} ({version})", gpu_or_emulated(renderer))
