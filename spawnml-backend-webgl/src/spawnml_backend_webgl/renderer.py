"""KernelIR -> a GLSL ES 3.00 fragment shader: one fragment per output element.

Every buffer is an R32UI texture of a fixed width (see ``layout.py``): inputs are read with
``texelFetch`` and reinterpreted from their 32-bit words, the output element is written as a
``uint`` colour. Types follow WebGL2, through the core passes: no 64-bit types (int64
computes as int32), float16 computes as float32 and is rounded through ``packHalf2x16`` on
casts and stores, ``%`` is spelled out (GLSL leaves it undefined for negative operands), bools
are stored as 0/1 words, and inputs beyond the texture units are packed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.cstyle import LIBM, CStyleRenderer
from spawnml.kernel.traits import TargetTraits, table
from spawnml.kernel.types import ScalarType as T

from .layout import TextureLayout

_UNDERSCORES = re.compile("__+")

VERTEX_SHADER = """#version 300 es
// One triangle covering the viewport: every texel of the output rows gets a fragment.
void main() {
    vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
    gl_Position = vec4(p, 0.0, 1.0);
}
"""

TRAITS = TargetTraits(
    "webgl",
    intrinsics={
        # Mesa's asin/acos are off by 4e-4, its tanh(NaN) is -1 and acosh(x < -1e10) -inf,
        # so those (with the NaN-sensitive min/max/sign, and isnan, which fast-math
        # compilers may fold away) come from the kernel-language polyfills; GLSL ES has no
        # erf or fmod either.
        **{k: v for k, v in LIBM.items() if k[0] not in ("asin", "acos", "tanh", "acosh")},
        **table({"rsqrt": "inversesqrt({0})", "round": "roundEven({0})",
                 "atan2": "atan({0}, {1})"}),
        **table({"abs": "abs({0})", "sign": "sign({0})"}, "signed"),
        **table({"min": "min({0}, {1})", "max": "max({0}, {1})"}, "int"),
        ("abs", "float"): "abs({0})",
        ("round_f16", "f32"): "sp_to_f16({0})",  # packHalf2x16 rounds to nearest even
    },
    f16_arithmetic=False, int64=False, int64_constants="error", c_remainder=False,
    bitcasts={(T.f32, T.u32): "floatBitsToUint({0})", (T.f32, T.i32): "floatBitsToInt({0})",
              (T.u32, T.f32): "uintBitsToFloat({0})", (T.i32, T.f32): "intBitsToFloat({0})",
              (T.i32, T.u32): "uint({0})", (T.u32, T.i32): "int({0})"},
    special_floats={"nan": "uintBitsToFloat(0x7FC00000u)", "inf": "uintBitsToFloat(0x7F800000u)",
                    "-inf": "uintBitsToFloat(0xFF800000u)"},
    buffers="texture",
)


class GLSLRenderer(CStyleRenderer):
    """GLSL ES 3.00 (WebGL2) fragment shaders reading inputs from R32UI textures."""

    name = "glsl"
    traits = TRAITS
    type_names: ClassVar[dict[T, str]] = {T.bool: "bool", T.i32: "int", T.u32: "uint",
                                          T.f32: "float"}
    float_suffix: ClassVar[dict[T, str]] = {T.f32: ""}  # GLSL ES 3.00 needs no 'f'
    out_name: ClassVar[str] = "result"

    def __init__(
        self,
        storage_dtype: Callable[[DType], DType],
        layout: TextureLayout,
        slots: dict[int, tuple[int, int]],
    ) -> None:
        """``slots`` maps an input number to (texture unit, word offset inside that texture)."""
        super().__init__(storage_dtype)
        self.layout = layout
        where = tuple(slots[i] for i in range(len(slots)))
        units = max((unit for unit, _ in where), default=-1) + 1
        words = tuple(ir.BufferSpec(f"tex{u}", DType.uint32, (0,)) for u in range(units))
        self.slots = (where, words)  # each unit a texture of 32-bit words

    def var_name(self, name: str) -> str:
        # GLSL ES reserves identifiers containing "__" and browsers reject them ("v__" is
        # Python's "_"); a run of k underscores becomes "_<k>x_".
        return _UNDERSCORES.sub(lambda m: f"_{len(m.group())}x_", name)

    def cast_text(self, x: str, src: T, dst: T) -> str:
        return x if self.type_name(src) == self.type_name(dst) else f"{self.type_name(dst)}({x})"

    def load(self, k: ir.KernelIR, buffer: int, index: str, t: T) -> str:
        word = f"sp_load{buffer}({index})"
        return f"({word} != 0u)" if t == T.bool else self.bitcast_text(word, T.u32, t)

    def store(self, k: ir.KernelIR, value: str, t: T) -> str:
        word = f"uint({value})" if t == T.bool else self.bitcast_text(value, t, T.u32)
        return f"{self.out_name} = {word};"

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        return ["void main() {"]

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        return [f"int gid = int(gl_FragCoord.y) * {self.layout.width} + int(gl_FragCoord.x);",
                f"if (gid >= {k.size}) {{ discard; }}"]

    def directives(self, k: ir.KernelIR) -> list[str]:
        """Version, precisions, samplers, the output and the helpers every kernel uses."""
        used = sorted({unit for unit, _ in self.slots[0]})
        shift, mask = self.layout.shift, self.layout.width - 1
        return [
            "#version 300 es", "precision highp float;", "precision highp int;",
            "precision highp usampler2D;",
            *[f"uniform highp usampler2D sp_tex{u};" for u in used],
            f"out highp uint {self.out_name};",
            "float sp_to_f16(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }",
            *[f"uint sp_load{u}(int j) {{ return texelFetch(sp_tex{u}, "
              f"ivec2(j & {mask}, j >> {shift}), 0).x; }}" for u in used],
        ]
