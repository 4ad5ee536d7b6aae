"""WGSL: the C-style renderer's tables plus what WGSL spells differently.

WGSL has no implicit conversions (``T(x)``), no ternary (``select(b, a, c)``), no NaN/Inf
literals, bitwise and shift operands must be unary expressions (always parenthesised), shifts
take ``u32``, parameters are immutable and ``bool`` is stored as ``u32``. Core passes compute
int64 as int32, make ``!=``/``bool(float)`` NaN-correct (naga/lavapipe compare ordered) and
pack inputs beyond the binding limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel import cstyle, ir
from spawnml.kernel.cstyle import BINARY, LIBM, CStyleRenderer, bitcasts
from spawnml.kernel.ir import Op
from spawnml.kernel.rewrite import PatternMatcher
from spawnml.kernel.traits import TargetTraits, table
from spawnml.kernel.types import ScalarType

from .layout import WORKGROUP_SIZE, Layout


def _wgsl_operands(e: ir.Binary) -> ir.Expr | None:
    """WGSL has no ``^`` on bool (``!=`` is the same) and shifts by ``u32`` only."""
    if e.op == Op.BITXOR and e.a.type == ScalarType.bool:
        return ir.Binary(e.type, Op.NE, e.a, e.b)
    if e.op in (Op.SHL, Op.SHR) and e.b.type != ScalarType.u32:
        return ir.Binary(e.type, e.op, e.a, ir.Cast(ScalarType.u32, e.b))
    return None


TRAITS = TargetTraits(
    "webgpu",
    intrinsics={
        # lavapipe: asin/acos 4e-4 off, log(1e-40) -88.02, tanh(1e-7) 19% off, acosh(-1e10)
        # -inf; WGSL leaves float min/max/sign of NaN open: those use the polyfills.
        **{k: v for k, v in LIBM.items()
           if k[0] not in ("asin", "acos", "log", "log2", "tanh", "acosh")},
        **table({"rsqrt": "inverseSqrt({0})", "round": "round({0})",  # half to even
                 "fmod": "({0} % {1})"}),  # WGSL float % is the truncated remainder
        **table({"abs": "abs({0})", "min": "min({0}, {1})", "max": "max({0}, {1})"}, "int"),
        ("abs", "float"): "abs({0})", ("sign", "i32"): "sign({0})",
        ("round_f16", "f32"): "unpack2x16float(pack2x16float(vec2<f32>({0}, 0.0))).x",
    },
    int64=False, nan_comparisons=False, bitcasts=bitcasts("bitcast<{dst}>({0})"),
    # A const-expression may not evaluate to NaN or Inf (WGSL 8.1; Tint, Chrome's compiler,
    # refuses the shader): the bits are read from a private variable, so at run time.
    special_floats={"nan": "bitcast<f32>(sp_special.x)", "inf": "bitcast<f32>(sp_special.y)",
                    "-inf": "bitcast<f32>(sp_special.z)"},
    buffers="binding", rules=PatternMatcher([(ir.Binary, _wgsl_operands)]),
)


class WGSLRenderer(CStyleRenderer):
    """KernelIR -> a WGSL compute shader; one invocation per output element."""

    name = "wgsl"
    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: "bool", ScalarType.i32: "i32", ScalarType.u32: "u32",
        ScalarType.f16: "f16", ScalarType.f32: "f32",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        DType.float32: "f32", DType.float16: "f16", DType.int32: "i32", DType.uint32: "u32",
    }
    i32_suffix, i32_min = "i", "i32(-2147483648)"
    float_suffix: ClassVar[dict[ScalarType, str]] = {ScalarType.f32: "f", ScalarType.f16: "h"}
    conversion, storage_zero, select_template = "{name}({x})", "{name}(0)", "select({b}, {a}, {c})"

    def __init__(
        self, storage_dtype: Callable[[DType], DType], layout: Layout, f16_arithmetic: bool = True
    ) -> None:
        super().__init__(storage_dtype)
        self.layout, self.slots = layout, layout.slots()
        self.traits = dataclasses.replace(TRAITS, f16_arithmetic=f16_arithmetic)

    def input_name(self, k: ir.KernelIR, i: int) -> str:
        return f"in{i}"

    def binary(self, e: ir.Binary) -> tuple[str, int]:
        sym, prec = BINARY[e.op]
        if e.op in (Op.SHL, Op.SHR, Op.BITAND, Op.BITOR, Op.BITXOR, Op.AND, Op.OR):
            # WGSL: these take unary operands and never mix without parentheses
            need = cstyle.PREC_REL if e.op in (Op.AND, Op.OR) else cstyle.PREC_UNARY
            return f"({self.wrap(e.a, need)} {sym} {self.wrap(e.b, need)})", cstyle.PREC_ATOM
        if prec <= cstyle.PREC_REL:  # a comparison's operands are shift expressions in WGSL
            a, b = self.wrap(e.a, cstyle.PREC_SHIFT), self.wrap(e.b, cstyle.PREC_SHIFT)
            return f"{a} {sym} {b}", prec
        return super().binary(e)

    def var_decl(self, v: ir.Var) -> str:
        return f"var {v.name}: {self.type_name(v.type)} = {self.literal(0, v.type)};"

    def function_header(self, f: ir.Function) -> str:
        # WGSL parameters are immutable: take them as p_<name> and copy into vars
        params = ", ".join(f"p_{p.name}: {self.type_name(p.type)}" for p in f.params)
        copies = "".join(f"\n{self.indent_unit}var {p.name}: {self.type_name(p.type)} = p_{p.name};"
                         for p in f.params)
        return f"fn {f.name}({params}) -> {self.type_name(f.ret)} {{{copies}"

    def uses_f16(self, k: ir.KernelIR) -> bool:
        return self.f16_arithmetic and super().uses_f16(k)

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        lines = [f"@group(0) @binding({n}) var<storage, read> in{n}: "
                 f"array<{self.storage_name(b.dtype)}>;" for n, b in enumerate(k.inputs)]
        lines.append(f"@group(0) @binding({len(k.inputs)}) var<storage, read_write> "
                     f"{self.out_name}: array<{self.storage_name(k.output.dtype)}>;")
        lines.append("var<private> sp_special: vec3<u32> = "
                     "vec3<u32>(0x7fc00000u, 0x7f800000u, 0xff800000u);  // NaN, Inf, -Inf")
        return [*lines, f"@compute @workgroup_size({WORKGROUP_SIZE})",
                "fn main(@builtin(global_invocation_id) g: vec3<u32>) {"]

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        x, y, _ = self.layout.grid
        row = x * WORKGROUP_SIZE
        return [f"let {self.gid_name} = i32(g.x + g.y * {row}u + g.z * {row * y}u);",
                f"if ({self.gid_name} >= {k.size}i) {{ return; }}"]

    def directives(self, k: ir.KernelIR) -> list[str]:
        return ["enable f16;"] if self.uses_f16(k) else []
