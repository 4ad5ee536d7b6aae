"""Kernels with more inputs than texture units: pack the extra inputs into one texture.

A WebGL2 fragment shader may sample only ``MAX_TEXTURE_IMAGE_UNITS`` textures (16 is what
every browser guarantees). A kernel with more inputs keeps the first ``units - 1`` as their
own textures and reads the rest from one packed texture at compile-time word offsets; before
each launch a copy pass per packed input writes it into the pack at its offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spawnml.errors import OutOfMemoryError
from spawnml.kernel import ir
from spawnml.kernel.slots import assign_slots

from .layout import TextureLayout
from .renderer import VERTEX_SHADER
from .textures import TextureBuffer

if TYPE_CHECKING:
    import moderngl


@dataclass(frozen=True)
class SlotPlan:
    """Where each input of a kernel is read from."""

    direct: tuple[int, ...]
    """Inputs bound to their own texture unit (unit = position in this tuple)."""
    packed: tuple[tuple[int, int, int], ...] = ()
    """(input, word offset, words) of the inputs read from the pack texture."""

    @property
    def pack_unit(self) -> int:
        return len(self.direct)

    @property
    def pack_words(self) -> int:
        return sum(words for _, _, words in self.packed)

    def slots(self) -> dict[int, tuple[int, int]]:
        """Input -> (texture unit, word offset), as the renderer wants it."""
        table = {slot: (unit, 0) for unit, slot in enumerate(self.direct)}
        table.update({slot: (self.pack_unit, offset) for slot, offset, _ in self.packed})
        return table


def plan_slots(k: ir.KernelIR, units: int, layout: TextureLayout) -> SlotPlan:
    """Give every input a texture unit, packing the tail when there are too few units
    (``spawnml.kernel.slots``: every input is 32-bit words, so all share one pack)."""
    count = len(k.inputs)
    words = [max(1, spec.size) for spec in k.inputs]
    slots = assign_slots(words, [0] * count, units, f"webgl: {k.name}")
    packed = tuple((i, offset, words[i]) for i, (_, offset) in enumerate(slots.where)
                   if i >= slots.direct)
    plan = SlotPlan(tuple(range(slots.direct)), packed)
    if plan.pack_words > layout.max_words:
        raise OutOfMemoryError(
            f"webgl: {k.name} has {count} inputs for {units} texture units; packing the last "
            f"{count - units + 1} needs {plan.pack_words} words, more than one texture holds "
            f"({layout.max_words})"
        )
    return plan


_COPY_SHADER = """#version 300 es
precision highp float;
precision highp int;
precision highp usampler2D;
uniform highp usampler2D source;
uniform int offset;
uniform int count;
out highp uint result;
void main() {{
    int j = int(gl_FragCoord.y) * {width} + int(gl_FragCoord.x) - offset;
    if (j < 0 || j >= count) {{ discard; }}
    result = texelFetch(source, ivec2(j & {mask}, j >> {shift}), 0).x;
}}
"""


def copy_shader(layout: TextureLayout) -> str:
    """The fragment shader copying ``count`` words of ``source`` to word ``offset``."""
    return _COPY_SHADER.format(width=layout.width, mask=layout.width - 1, shift=layout.shift)


class Packer:
    """Copies inputs into a pack texture at word offsets (one draw per input)."""

    def __init__(self, ctx: moderngl.Context, layout: TextureLayout) -> None:
        self.ctx, self.layout = ctx, layout
        self.program = ctx.program(vertex_shader=VERTEX_SHADER, fragment_shader=copy_shader(layout))
        self.program["source"] = 0
        self.vao = ctx.vertex_array(self.program, [])

    def pack(self, plan: SlotPlan, inputs: list[TextureBuffer], into: TextureBuffer) -> None:
        import moderngl

        width = self.layout.width
        framebuffer = into.framebuffer(self.ctx)
        framebuffer.use()
        for slot, offset, words in plan.packed:
            inputs[slot].texture.use(0)
            self.program["offset"] = offset
            self.program["count"] = words
            first = offset // width
            framebuffer.viewport = (0, first, width, self.layout.rows(offset + words) - first)
            self.vao.render(mode=moderngl.TRIANGLES, vertices=3)

    def release(self) -> None:
        self.vao.release()
        self.program.release()
