"""How a flat buffer of 32-bit words lies in a 2-D texture.

WebGL2 textures are at most ``MAX_TEXTURE_SIZE`` texels per side (16384 on most browsers),
far fewer than a tensor's elements, so word ``i`` of every buffer is texel
``(i % width, i // width)`` of a texture ``width`` texels wide: long tensors wrap rows. The
width is one power of two for the whole backend, so shaders compute coordinates with a mask
and a shift and need no per-buffer uniform.
"""

from __future__ import annotations

from dataclasses import dataclass

from spawnml.errors import InvalidInputError


@dataclass(frozen=True)
class TextureLayout:
    """Row-major wrapping of words into textures ``width`` wide and at most ``max_rows`` tall."""

    width: int
    max_rows: int

    def __post_init__(self) -> None:
        if self.width < 1 or self.width & (self.width - 1):
            raise InvalidInputError(f"texture width must be a power of two, got {self.width}")

    @property
    def shift(self) -> int:
        return self.width.bit_length() - 1

    @property
    def max_words(self) -> int:
        return self.width * self.max_rows

    def rows(self, words: int) -> int:
        """Rows holding ``words`` words (at least one: GL has no empty textures)."""
        return max(1, -(-words // self.width))

    def viewport(self, words: int) -> tuple[int, int, int, int]:
        """The viewport that draws one fragment per word: whole rows, but only the first
        ``words`` texels of a tensor shorter than one row (a bias of 8 elements draws 8
        fragments, not a 4096-wide row of discarded ones)."""
        return (0, 0, min(self.width, max(1, words)), self.rows(words))

    @classmethod
    def for_limit(cls, max_texture_size: int, width: int | None = None) -> TextureLayout:
        """The default layout under a device's texture size limit (4096 wide unless given)."""
        chosen = width if width is not None else 1 << (min(4096, max_texture_size).bit_length() - 1)
        if chosen > max_texture_size:
            raise InvalidInputError(
                f"texture width {chosen} exceeds the device's MAX_TEXTURE_SIZE {max_texture_size}"
            )
        return cls(chosen, max_texture_size)
