"""Reading R32UI textures back to the host with plain ``glReadPixels``.

moderngl's ``Texture.read`` and ``Framebuffer.read`` raise ``GL_INVALID_OPERATION`` on an
OpenGL ES context for integer formats (and ``Texture.read`` returned another texture's
contents on Mesa 22.3), so the backend reads the bound framebuffer itself, with the pair
ES 3.0 always accepts for an unsigned-integer colour buffer (``RGBA_INTEGER``,
``UNSIGNED_INT``) or the implementation's single-channel ``RED_INTEGER`` when it offers it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from spawnml.errors import BackendError

GL_RED_INTEGER = 0x8D94
GL_RGBA_INTEGER = 0x8D99
GL_UNSIGNED_INT = 0x1405
GL_IMPLEMENTATION_COLOR_READ_TYPE = 0x8B9A
GL_IMPLEMENTATION_COLOR_READ_FORMAT = 0x8B9B

_u = ctypes.c_uint32
_i = ctypes.c_int32


class PixelReader:
    """``glReadPixels`` of the bound framebuffer's R32UI colour attachment into numpy."""

    def __init__(self, load: Callable[[str], int]) -> None:
        def fn(name: str, restype: type | None, *args: type) -> Callable[..., object]:
            address = load(name)
            if not address:
                raise BackendError(f"the OpenGL ES driver lacks {name}")
            return ctypes.CFUNCTYPE(restype, *args)(address)

        self._get_error = fn("glGetError", _u)
        self._read_pixels = fn("glReadPixels", None, _i, _i, _i, _i, _u, _u, ctypes.c_void_p)
        self._get_integer = fn("glGetIntegerv", None, _u, ctypes.POINTER(_i))
        self._components: int | None = None

    def clear_errors(self) -> None:
        """Drop pending GL errors (moderngl's ``ctx.info`` queries desktop-only enums)."""
        for _ in range(64):
            if not self._get_error():
                return

    def get_integer(self, name: int) -> int:
        """``glGetIntegerv`` of one value."""
        value = _i()
        self._get_integer(name, ctypes.byref(value))
        return value.value

    def read(self, width: int, rows: int) -> np.ndarray:
        """The first ``rows`` rows of the bound framebuffer as uint32 texels (one per pixel)."""
        self.clear_errors()
        if self._components is None:
            # Only valid while an integer framebuffer is bound, so asked on the first read.
            fmt = self.get_integer(GL_IMPLEMENTATION_COLOR_READ_FORMAT)
            typ = self.get_integer(GL_IMPLEMENTATION_COLOR_READ_TYPE)
            single = fmt == GL_RED_INTEGER and typ == GL_UNSIGNED_INT
            self._components = 1 if single else 4
        components = self._components
        out = np.empty(width * rows * components, np.uint32)
        fmt = GL_RED_INTEGER if components == 1 else GL_RGBA_INTEGER
        self._read_pixels(0, 0, width, rows, fmt, GL_UNSIGNED_INT, out.ctypes.data)
        error = self._get_error()
        if error:
            raise BackendError(
                f"glReadPixels of a {width}x{rows} R32UI texture: GL error {error:#x}"
            )
        return out if components == 1 else out[::4].copy()
