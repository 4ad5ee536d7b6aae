"""KernelIR -> a GLSL ES 3.00 fragment shader: one fragment per output element.

Every buffer is an R32UI texture of a fixed width (see ``layout.py``): inputs are read with
``texelFetch`` and reinterpreted from their 32-bit words, the output element is written as a
``uint`` colour. Types follow WebGL2: no 64-bit types (int64 computes as int32), float16
computes as float32 and is rounded through ``packHalf2x16`` on casts and stores, bools are
stored as 0/1 words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.errors import KernelCompileError
from spawnml.kernel import ir
from spawnml.kernel.cstyle import CStyleRenderer
from spawnml.kernel.types import ScalarType

from .layout import TextureLayout

_F, _I, _U, _B = "float", "int", "uint", "bool"
_UNDERSCORES = re.compile("__+")
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1

VERTEX_SHADER = """#version 300 es
// One triangle covering the viewport: every texel of the output rows gets a fragment.
void main() {
    vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
    gl_Position = vec4(p, 0.0, 1.0);
}
"""


class GLSLRenderer(CStyleRenderer):
    """GLSL ES 3.00 (WebGL2) fragment shaders reading inputs from R32UI textures."""

    name = "glsl"
    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: _B, ScalarType.i32: _I, ScalarType.u32: _U,
        ScalarType.i64: _I, ScalarType.f16: _F, ScalarType.f32: _F,
    }
    # Mesa's asin/acos are off by 4e-4 and its tanh(NaN) is -1, so those (with the
    # NaN-sensitive min/max/sign, and isnan, which fast-math compilers may fold away) come
    # from the kernel-language polyfills; GLSL ES has no erf or fmod either.
    intrinsics: ClassVar[dict[str, str]] = {
        **{k: v for k, v in CStyleRenderer.intrinsics.items() if k not in ("asin", "acos", "tanh")},
        "rsqrt": "inversesqrt({0})", "round": "roundEven({0})", "atan2": "atan({0}, {1})",
    }
    typed_intrinsics: ClassVar[dict[tuple[str, str], str]] = {
        ("abs", "float"): "abs({0})", ("abs", "i32"): "abs({0})", ("abs", "i64"): "abs({0})",
        ("sign", "i32"): "sign({0})", ("sign", "i64"): "sign({0})",
        ("min", "int"): "min({0}, {1})", ("max", "int"): "max({0}, {1})",
    }
    f16_arithmetic = False  # WebGL2 has no half type: f16 is f32, rounded by round_f16
    gid_name: ClassVar[str] = "gid"
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
        self.slots = slots

    def var_name(self, name: str) -> str:
        # GLSL ES reserves identifiers containing "__" and browsers reject them ("v__" is
        # Python's "_"); a run of k underscores becomes "_<k>x_".
        return _UNDERSCORES.sub(lambda m: f"_{len(m.group())}x_", name)

    # ------------------------------------------------------------------ literals
    def int_literal(self, v: int, t: ScalarType) -> str:
        if t == ScalarType.u32:
            return f"{v}u"
        if not _I32_MIN <= v <= _I32_MAX:
            raise KernelCompileError(
                f"webgl has no 64-bit integers: the constant {v} does not fit the int32 that "
                f"{t} values are lowered to"
            )
        return str(v) if v != _I32_MIN else "(-2147483647 - 1)"

    def float_literal(self, v: float, t: ScalarType) -> str:
        if v != v or v in (float("inf"), float("-inf")):
            return self.special_float("nan" if v != v else ("inf" if v > 0 else "-inf"), t)
        return self.float_text(v, t)  # GLSL ES 3.00: no 'f' suffix needed

    def special_float(self, which: str, t: ScalarType) -> str:
        bits = {"nan": "0x7FC00000u", "inf": "0x7F800000u", "-inf": "0xFF800000u"}[which]
        return f"uintBitsToFloat({bits})"

    # ------------------------------------------------------------------ conversions
    def round_f16(self, x: str) -> str:
        return f"sp_to_f16({x})"  # packHalf2x16 rounds to nearest even (checked in tests)

    def cast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        if self.type_name(src) == self.type_name(dst):
            return x
        return f"{self.type_name(dst)}({x})"

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        pair = (self.type_name(src), self.type_name(dst))
        spelling = {
            (_F, _U): "floatBitsToUint", (_F, _I): "floatBitsToInt",
            (_U, _F): "uintBitsToFloat", (_I, _F): "intBitsToFloat", (_I, _U): "uint",
            (_U, _I): "int",
        }.get(pair)
        if pair[0] == pair[1]:
            return x
        if spelling is None:
            raise KernelCompileError(f"webgl: no bitcast from {src} to {dst}")
        return f"{spelling}({x})"

    # ------------------------------------------------------------------ operators
    def binary(self, e: ir.Binary) -> tuple[str, int]:
        # GLSL leaves % undefined for negative operands and has no % on floats.
        if e.op == "mod" and (e.type.is_float or e.type.is_signed):
            a, b = self.text(e.a), self.text(e.b)
            quotient = f"trunc(({a}) / ({b}))" if e.type.is_float else f"(({a}) / ({b}))"
            return f"(({a}) - ({b}) * {quotient})", 100
        return super().binary(e)

    # ------------------------------------------------------------------ memory
    def load(self, k: ir.KernelIR, buffer: int, index: str, t: ScalarType) -> str:
        word = f"sp_load{buffer}({index})"
        if t == ScalarType.bool:
            return f"({word} != 0u)"
        return self.bitcast_text(word, ScalarType.u32, t)

    def store(self, k: ir.KernelIR, value: str, t: ScalarType) -> str:
        if k.output.dtype is DType.float16:
            value = self.round_f16(value)
        if t == ScalarType.bool:
            word = f"uint({value})"
        else:
            word = self.bitcast_text(value, t, ScalarType.u32)
        return f"{self.out_name} = {word};"

    # ------------------------------------------------------------------ skeleton
    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        return ["void main() {"]

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        width = self.layout.width
        return [
            f"int gid = int(gl_FragCoord.y) * {width} + int(gl_FragCoord.x);",
            f"if (gid >= {k.size}) {{ discard; }}",
        ]

    def header(self, k: ir.KernelIR) -> str:
        """Version, precisions, samplers, the output and the helpers every kernel uses."""
        units = sorted({unit for unit, _ in self.slots.values()})
        lines = [
            "#version 300 es",
            "precision highp float;",
            "precision highp int;",
            "precision highp usampler2D;",
            *[f"uniform highp usampler2D sp_tex{u};" for u in units],
            f"out highp uint {self.out_name};",
            "float sp_to_f16(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }",
        ]
        shift, mask = self.layout.shift, self.layout.width - 1
        for slot, (unit, offset) in sorted(self.slots.items()):
            at = f"i + {offset}" if offset else "i"
            lines.append(
                f"uint sp_load{slot}(int i) {{ int j = {at}; "
                f"return texelFetch(sp_tex{unit}, ivec2(j & {mask}, j >> {shift}), 0).x; }}"
            )
        return "\n".join(lines)

    def render(self, k: ir.KernelIR) -> str:
        body = super().render(k)
        first, rest = body.split("\n", 1)  # keep the "// name from file:line" comment first
        return f"{self.header(k)}\n{first}\n{rest}"
