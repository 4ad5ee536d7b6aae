"""Buffers of the webgl backend: R32UI textures holding 32-bit words, row-wrapped.

One format for every dtype: the shader reinterprets words (``uintBitsToFloat``, ``int()``),
so a buffer never needs to know its element type, reads and writes are bit-exact (NaN
payloads, -0.0), and rendering into it needs no extension (integer colour buffers are core
in OpenGL ES 3.0; float ones need ``EXT_color_buffer_float``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .layout import TextureLayout
from .readback import PixelReader

if TYPE_CHECKING:  # moderngl loads libGL: only when a backend is constructed
    import moderngl


class TextureBuffer:
    """A buffer handle: an R32UI texture ``layout.width`` wide, and its framebuffer."""

    __slots__ = ("texture", "rows", "_framebuffer")

    def __init__(self, ctx: moderngl.Context, layout: TextureLayout, words: int) -> None:
        import moderngl

        self.rows = layout.rows(words)
        self.texture = ctx.texture((layout.width, self.rows), 1, dtype="u4")
        # Integer textures are incomplete (texelFetch returns 0) with a linear filter.
        self.texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._framebuffer: Any = None

    def framebuffer(self, ctx: moderngl.Context) -> moderngl.Framebuffer:
        """The framebuffer rendering into (and reading from) this texture."""
        if self._framebuffer is None:
            self._framebuffer = ctx.framebuffer(color_attachments=[self.texture])
        return self._framebuffer

    def swap(self, other: TextureBuffer) -> None:
        """Exchange storage with ``other`` (same size): a zero-copy 'copy back'."""
        self.texture, other.texture = other.texture, self.texture
        self._framebuffer, other._framebuffer = other._framebuffer, self._framebuffer
        self.rows, other.rows = other.rows, self.rows

    def release(self) -> None:
        if self._framebuffer is not None:
            self._framebuffer.release()
            self._framebuffer = None
        self.texture.release()


def write_words(buffer: TextureBuffer, layout: TextureLayout, data: np.ndarray) -> None:
    """Copy host bytes into the first words of ``buffer`` (full rows, then the partial one)."""
    raw = data.reshape(-1).view(np.uint8)
    if raw.size % 4:
        raw = np.concatenate([raw, np.zeros(4 - raw.size % 4, np.uint8)])
    words = raw.view(np.uint32)
    full, rest = divmod(words.size, layout.width)
    split = full * layout.width
    if full:
        buffer.texture.write(words[:split], viewport=(0, 0, layout.width, full), alignment=4)
    if rest:
        buffer.texture.write(words[split:], viewport=(0, full, rest, 1), alignment=4)


def read_words(
    ctx: moderngl.Context,
    reader: PixelReader,
    buffer: TextureBuffer,
    layout: TextureLayout,
    nbytes: int,
) -> np.ndarray:
    """The first ``nbytes`` of ``buffer`` as uint8 (waits for queued work)."""
    words = -(-nbytes // 4)
    buffer.framebuffer(ctx).use()
    return reader.read(layout.width, layout.rows(words)).view(np.uint8)[:nbytes]
