"""An OpenGL ES 3.0 context over EGL with no window: Mesa's surfaceless platform.

WebGL2 is OpenGL ES 3.0, so the webgl backend runs on a real ES context, which rejects
desktop GLSL like a browser does. The context is made with ctypes (no extra dependency) and
handed to moderngl through its loader interface (``load_opengl_function``, ``__enter__``,
``__exit__``, ``release``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from types import TracebackType

from spawnml.errors import BackendUnavailableError

EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
EGL_OPENGL_ES_API = 0x30A0
EGL_RENDERABLE_TYPE = 0x3040
EGL_OPENGL_ES3_BIT = 0x0040
EGL_SURFACE_TYPE = 0x3033
EGL_CONTEXT_MAJOR_VERSION = 0x3098
EGL_CONTEXT_MINOR_VERSION = 0x30FB
EGL_EXTENSIONS = 0x3055
EGL_VENDOR = 0x3053
EGL_NONE = 0x3038
EGL_DRAW = 0x3059
EGL_READ = 0x305A

_ERRORS = {
    0x3000: "EGL_SUCCESS",
    0x3001: "EGL_NOT_INITIALIZED",
    0x3002: "EGL_BAD_ACCESS",
    0x3003: "EGL_BAD_ALLOC",
    0x3004: "EGL_BAD_ATTRIBUTE",
    0x3005: "EGL_BAD_CONFIG",
    0x3006: "EGL_BAD_CONTEXT",
    0x3007: "EGL_BAD_CURRENT_SURFACE",
    0x3008: "EGL_BAD_DISPLAY",
    0x3009: "EGL_BAD_MATCH",
    0x300A: "EGL_BAD_NATIVE_PIXMAP",
    0x300B: "EGL_BAD_NATIVE_WINDOW",
    0x300C: "EGL_BAD_PARAMETER",
    0x300D: "EGL_BAD_SURFACE",
    0x300E: "EGL_CONTEXT_LOST",
}

_vp = ctypes.c_void_p
_int = ctypes.c_int32
_bool = ctypes.c_uint32
_enum = ctypes.c_uint32
_SIGNATURES: dict[str, tuple[type | None, list[type]]] = {
    "eglGetError": (_int, []),
    "eglGetProcAddress": (_vp, [ctypes.c_char_p]),
    "eglQueryString": (ctypes.c_char_p, [_vp, _int]),
    "eglInitialize": (_bool, [_vp, ctypes.POINTER(_int), ctypes.POINTER(_int)]),
    "eglBindAPI": (_bool, [_enum]),
    "eglChooseConfig": (
        _bool,
        [_vp, ctypes.POINTER(_int), ctypes.POINTER(_vp), _int, ctypes.POINTER(_int)],
    ),
    "eglCreateContext": (_vp, [_vp, _vp, _vp, ctypes.POINTER(_int)]),
    "eglDestroyContext": (_bool, [_vp, _vp]),
    "eglMakeCurrent": (_bool, [_vp, _vp, _vp, _vp]),
    "eglGetCurrentContext": (_vp, []),
    "eglGetCurrentDisplay": (_vp, []),
    "eglGetCurrentSurface": (_vp, [_int]),
}
_GET_PLATFORM_DISPLAY = ctypes.CFUNCTYPE(_vp, _enum, _vp, ctypes.POINTER(_int))


def _attribs(*pairs: int) -> ctypes.Array[ctypes.c_int32]:
    values = [*pairs, EGL_NONE]
    return (_int * len(values))(*values)


@functools.cache
def egl_library() -> ctypes.CDLL:
    """libEGL with the prototypes this module calls (raises when there is none)."""
    name = "libEGL.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        found = ctypes.util.find_library("EGL")
        if not found:
            raise BackendUnavailableError(
                f"{name} not found: no EGL driver (Debian: apt-get install libegl1 libegl-mesa0)"
            ) from None
        lib = ctypes.CDLL(found)
    for fname, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, fname)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def _fail(what: str) -> BackendUnavailableError:
    code = egl_library().eglGetError()
    return BackendUnavailableError(f"{what} failed ({_ERRORS.get(code, hex(code))})")


_display_lock = threading.Lock()
_display: int | None = None


def surfaceless_display() -> int:
    """The process-wide, initialised EGL display of Mesa's surfaceless platform."""
    global _display
    with _display_lock:
        if _display is not None:
            return _display
        egl = egl_library()
        client = (egl.eglQueryString(None, EGL_EXTENSIONS) or b"").decode()
        if "EGL_MESA_platform_surfaceless" not in client.split():
            raise BackendUnavailableError(
                "EGL has no surfaceless platform (EGL_MESA_platform_surfaceless): "
                "install Mesa's EGL driver (Debian: libegl-mesa0)"
            )
        address = egl.eglGetProcAddress(b"eglGetPlatformDisplayEXT")
        if not address:
            raise BackendUnavailableError("EGL lacks eglGetPlatformDisplayEXT")
        get_display = _GET_PLATFORM_DISPLAY(address)
        display = get_display(EGL_PLATFORM_SURFACELESS_MESA, None, None)
        if not display:
            raise _fail("eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA)")
        major, minor = _int(), _int()
        if not egl.eglInitialize(display, ctypes.byref(major), ctypes.byref(minor)):
            raise _fail("eglInitialize")
        _display = display
        return display


class EGLContext:
    """An OpenGL ES context (3.0 by default) with no surface, usable as a moderngl loader."""

    def __init__(self, major: int = 3, minor: int = 0) -> None:
        egl = self._egl = egl_library()
        self.display = surfaceless_display()
        self.vendor = (egl.eglQueryString(self.display, EGL_VENDOR) or b"").decode()
        if not egl.eglBindAPI(EGL_OPENGL_ES_API):
            raise _fail("eglBindAPI(EGL_OPENGL_ES_API)")
        config, count = _vp(), _int()
        wanted = _attribs(EGL_RENDERABLE_TYPE, EGL_OPENGL_ES3_BIT, EGL_SURFACE_TYPE, 0)
        if not egl.eglChooseConfig(
            self.display, wanted, ctypes.byref(config), 1, ctypes.byref(count)
        ):
            raise _fail("eglChooseConfig")
        if count.value < 1:
            raise BackendUnavailableError("EGL offers no config with OpenGL ES 3 support")
        version = _attribs(EGL_CONTEXT_MAJOR_VERSION, major, EGL_CONTEXT_MINOR_VERSION, minor)
        handle = egl.eglCreateContext(self.display, config, None, version)
        if not handle:
            raise _fail(f"eglCreateContext(OpenGL ES {major}.{minor})")
        self.handle: int | None = handle
        self._saved: list[tuple[int | None, int | None, int | None, int | None]] = []
        self._gles: ctypes.CDLL | None = None

    def make_current(self) -> None:
        """Bind this context to the calling thread (no draw or read surface)."""
        if self.handle is None:
            raise BackendUnavailableError("the EGL context was released")
        self._egl.eglBindAPI(EGL_OPENGL_ES_API)
        if not self._egl.eglMakeCurrent(self.display, None, None, self.handle):
            raise _fail("eglMakeCurrent")

    def is_current(self) -> bool:
        """Whether this context is bound to the calling thread."""
        return self.handle is not None and self._egl.eglGetCurrentContext() == self.handle

    def __enter__(self) -> EGLContext:
        egl = self._egl
        self._saved.append(
            (
                egl.eglGetCurrentDisplay(),
                egl.eglGetCurrentSurface(EGL_DRAW),
                egl.eglGetCurrentSurface(EGL_READ),
                egl.eglGetCurrentContext(),
            )
        )
        self.make_current()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        display, draw, read, previous = self._saved.pop()
        if display:
            self._egl.eglMakeCurrent(display, draw, read, previous)
        else:
            self._egl.eglMakeCurrent(self.display, None, None, None)

    def load_opengl_function(self, name: str) -> int:
        """The address of a GL ES function (0 when the driver lacks it)."""
        address = self._egl.eglGetProcAddress(name.encode())
        if address:
            return address
        if self._gles is None:
            self._gles = ctypes.CDLL(ctypes.util.find_library("GLESv2") or "libGLESv2.so.2")
        return ctypes.cast(getattr(self._gles, name, 0), _vp).value or 0

    def release(self) -> None:
        """Destroy the context (idempotent)."""
        if self.handle is None:
            return
        if self._egl.eglGetCurrentContext() == self.handle:
            self._egl.eglMakeCurrent(self.display, None, None, None)
        self._egl.eglDestroyContext(self.display, self.handle)
        self.handle = None
