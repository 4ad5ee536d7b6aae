"""WGSL: the C-style renderer's tables plus what WGSL spells differently.

WGSL has no implicit conversions (casts are ``T(x)``), no ternary (``select(b, a, c)``), no
NaN/Inf literals (bit patterns instead), operands of bitwise and shift operators must be
unary expressions (so those are always parenthesised), shift amounts are ``u32``, function
parameters are immutable, and ``bool`` is not host-shareable (stored as ``u32``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.cstyle import BINARY, PREC_ATOM, PREC_REL, PREC_UNARY, CStyleRenderer
from spawnml.kernel.types import ScalarType

from .layout import WORKGROUP_SIZE, Layout

_BITS = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_ROUND_F16 = "unpack2x16float(pack2x16float(vec2<f32>({0}, 0.0))).x"


class WGSLRenderer(CStyleRenderer):
    """KernelIR -> a WGSL compute shader; one invocation per output element."""

    name = "wgsl"
    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: "bool", ScalarType.i32: "i32", ScalarType.u32: "u32",
        ScalarType.i64: "i32",  # int64 is stored and computed as int32 (range-checked upload)
        ScalarType.f16: "f16", ScalarType.f32: "f32",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        DType.float32: "f32", DType.float16: "f16", DType.int32: "i32", DType.uint32: "u32",
    }
    intrinsics: ClassVar[dict[str, str]] = {
        # lavapipe's asin/acos are off by up to 4e-4: those use the kernel-language polyfills
        **{k: v for k, v in CStyleRenderer.intrinsics.items() if k not in ("asin", "acos")},
        "rsqrt": "inverseSqrt({0})",
        "round": "round({0})",  # WGSL rounds half to even
        "fmod": "({0} % {1})",  # WGSL float % is the truncated remainder
    }
    typed_intrinsics: ClassVar[dict[tuple[str, str], str]] = {
        # WGSL leaves float min/max/sign of NaN unspecified: those use the polyfills.
        ("abs", "float"): "abs({0})", ("abs", "int"): "abs({0})",
        ("min", "int"): "min({0}, {1})", ("max", "int"): "max({0}, {1})",
        ("sign", "i32"): "sign({0})",
    }

    def __init__(
        self,
        storage_dtype: Callable[[DType], DType],
        layout: Layout,
        f16_arithmetic: bool = True,
    ) -> None:
        super().__init__(storage_dtype)
        self.layout = layout
        self.f16_arithmetic = f16_arithmetic

    # ------------------------------------------------------------------ types and literals
    def int_literal(self, v: int, t: ScalarType) -> str:
        if t == ScalarType.u32:
            return f"{v}u"
        if t == ScalarType.i64:  # lowered to i32: saturate sentinels such as INT64_MAX
            v = min(max(v, _I32_MIN), _I32_MAX)
        return f"{v}i" if v != _I32_MIN else "i32(-2147483648)"

    def float_literal(self, v: float, t: ScalarType) -> str:
        if t == ScalarType.f16 and self.f16_arithmetic and math.isfinite(v):
            return self.float_text(v, t) + "h"
        return super().float_literal(v, t)

    def round_f16(self, x: str) -> str:
        return _ROUND_F16.format(x)

    def cast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        if dst == ScalarType.bool and src.is_float:
            # bool(NaN) is true, but lavapipe compares NaN != 0.0 as false: test the bits
            x = x if self.type_name(src) == "f32" else f"f32({x})"
            return f"((bitcast<u32>({x}) & 0x7fffffffu) != 0u)"
        return f"{self.type_name(dst)}({x})"

    def special_float(self, which: str, t: ScalarType) -> str:
        text = f"bitcast<f32>({_BITS[which]:#010x}u)"
        return text if self.type_name(t) == "f32" else f"{self.type_name(t)}({text})"

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return f"bitcast<{self.type_name(dst)}>({x})"

    def select_text(self, c: str, a: str, b: str, t: ScalarType) -> str:
        return f"select({b}, {a}, {c})"

    # ------------------------------------------------------------------ memory
    def load(self, k: ir.KernelIR, buffer: int, index: str, t: ScalarType) -> str:
        binding, offset = self.layout.where[buffer]
        at = f"{offset}i + {index}" if offset else index
        storage = self.storage_dtype(k.inputs[buffer].dtype)
        return self.from_storage(f"in{binding}[{at}]", storage, t)

    def from_storage(self, text: str, storage: DType, t: ScalarType) -> str:
        name = self.storage_names[storage]
        if name == self.type_name(t):
            return text
        if t == ScalarType.bool:
            return f"({text} != {name}(0))"
        return f"{self.type_name(t)}({text})"

    def to_storage(self, value: str, t: ScalarType, storage: DType) -> str:
        name = self.storage_names[storage]
        if name != self.type_name(t):
            return f"{name}({value})"
        return super().to_storage(value, t, storage)  # rounds emulated f16

    # ------------------------------------------------------------------ expressions
    def binary(self, e: ir.Binary) -> tuple[str, int]:
        sym, prec = BINARY[e.op]
        if e.op == "bitxor" and e.a.type == ScalarType.bool:
            sym, prec = "!=", PREC_REL - 1  # WGSL has no ^ on bool
        if e.op in ("shl", "shr", "bitand", "bitor", "bitxor", "and", "or") and sym != "!=":
            # WGSL: these take unary operands and never mix without parentheses
            need = PREC_UNARY if e.op not in ("and", "or") else PREC_REL
            left = self.wrap(e.a, need)
            right = self.wrap(e.b, need)
            if e.op in ("shl", "shr") and e.b.type != ScalarType.u32:
                right = f"u32({self.text(e.b)})"
            return f"({left} {sym} {right})", PREC_ATOM
        if e.op == "ne" and e.a.type.is_float:
            # NaN != x is true, but naga/lavapipe compile != as an ordered comparison
            a, b = self.wrap(e.a, prec, tight=True), self.wrap(e.b, prec, tight=True)
            return f"!({a} == {b})", PREC_UNARY
        if prec <= PREC_REL:  # comparisons do not chain in WGSL
            left = self.wrap(e.a, prec, tight=True)
            right = self.wrap(e.b, prec, tight=True)
            return f"{left} {sym} {right}", prec
        return super().binary(e)

    # ------------------------------------------------------------------ statements
    def var_decl(self, v: ir.Var) -> str:
        return f"var {v.name}: {self.type_name(v.type)} = {self.literal(0, v.type)};"

    def function_header(self, f: ir.Function) -> str:
        # WGSL parameters are immutable: take them as p_<name> and copy into vars
        params = ", ".join(f"p_{p.name}: {self.type_name(p.type)}" for p in f.params)
        copies = "".join(
            f"\n{self.indent_unit}var {p.name}: {self.type_name(p.type)} = p_{p.name};"
            for p in f.params
        )
        return f"fn {f.name}({params}) -> {self.type_name(f.ret)} {{{copies}"

    # ------------------------------------------------------------------ skeleton
    def uses_f16(self, k: ir.KernelIR) -> bool:
        if not self.f16_arithmetic:
            return False
        specs = (*k.inputs, k.output)
        if any(self.storage_dtype(s.dtype) == DType.float16 for s in specs):
            return True
        types = {v.type for v in k.locals} | {e.type for e in ir.all_exprs(k.body)}
        return ScalarType.f16 in types or any(
            ScalarType.f16 in {p.type for p in f.params} | {f.ret} for f in self.functions(k)
        )

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        lines = ["enable f16;"] if self.uses_f16(k) else []
        for n, b in enumerate(self.layout.inputs):
            lines.append(f"@group(0) @binding({n}) var<storage, read> in{n}: "
                         f"array<{self.storage_names[b.storage]}>;")
        out = self.storage_name(k.output.dtype)
        lines.append(f"@group(0) @binding({len(self.layout.inputs)}) "
                     f"var<storage, read_write> {self.out_name}: array<{out}>;")
        lines.append(f"@compute @workgroup_size({WORKGROUP_SIZE})")
        lines.append("fn main(@builtin(global_invocation_id) g: vec3<u32>) {")
        return lines

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        x, y, _ = self.layout.grid
        row = x * WORKGROUP_SIZE
        return [
            f"let {self.gid_name} = i32(g.x + g.y * {row}u + g.z * {row * y}u);",
            f"if ({self.gid_name} >= {k.size}i) {{ return; }}",
        ]

    def render(self, k: ir.KernelIR) -> str:
        source = super().render(k)
        if source.find("enable f16;") > 0:  # directives must precede every declaration
            source = "enable f16;\n" + source.replace("enable f16;\n", "", 1)
        return source
