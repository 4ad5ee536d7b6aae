"""The 4-wide SIMD128 loop of lane-safe kernels.

A kernel is lane-safe when its body is straight-line (assignments, then one return), every
value is bool, i32, u32 or f32, and its output is stored in 4-byte elements: then four
consecutive invocations run as one, each variable a v128 (bools as all-ones/zero masks).
Loads at ``gid`` are one ``v128.load``; other loads gather lane by lane (clamped, like the
scalar code). Operations SIMD128 lacks (integer division, polyfill calls, f32 -> u32) run
lane-wise on extracted scalars, so any lane-safe kernel vectorises and the rest stays SIMD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.ir import Op
from spawnml.kernel.types import ScalarType
from spawnml.kernel.visitor import Visitor

from .wat import F32X4_CALLS, MEMORY_OPS, float_const

if TYPE_CHECKING:
    from .wat import WasmRenderer

T = ScalarType
LANE_TYPES = frozenset({T.bool, T.i32, T.u32, T.f32})
_WIDE_STORAGE = (DType.float32, DType.int32, DType.uint32)
_F32X4 = {
    "add": "f32x4.add",
    "sub": "f32x4.sub",
    "mul": "f32x4.mul",
    "div": "f32x4.div",
    "lt": "f32x4.lt",
    "le": "f32x4.le",
    "gt": "f32x4.gt",
    "ge": "f32x4.ge",
    "eq": "f32x4.eq",
    "ne": "f32x4.ne",
}
_I32X4 = {
    "add": "i32x4.add",
    "sub": "i32x4.sub",
    "mul": "i32x4.mul",
    "bitand": "v128.and",
    "bitor": "v128.or",
    "bitxor": "v128.xor",
    "and": "v128.and",
    "or": "v128.or",
    "eq": "i32x4.eq",
    "ne": "i32x4.ne",
}
_I32X4_SIGNED = ("lt", "le", "gt", "ge")


def lane_safe(k: ir.KernelIR, storage_dtype: Callable[[DType], DType]) -> bool:
    """Whether four consecutive invocations of ``k`` can run as one SIMD128 invocation."""
    body = k.body
    if not body or not isinstance(body[-1], ir.Return):
        return False
    if any(not isinstance(s, ir.Assign) for s in body[:-1]):
        return False
    if storage_dtype(k.output.dtype) not in _WIDE_STORAGE:
        return False
    if any(v.type not in LANE_TYPES for v in k.locals):
        return False
    return all(e.type in LANE_TYPES for e in ir.all_exprs(body))


class VectorBody(Visitor):
    """Renders the SIMD loop of a lane-safe kernel, sharing the scalar renderer's helpers."""

    def __init__(self, r: WasmRenderer, k: ir.KernelIR) -> None:
        self.r = r
        self.k = k
        self.count = 0

    def vtemp(self) -> str:
        self.count += 1
        return f"$vt{self.count}"

    def locals(self) -> list[str]:
        names = [f"$x_{v.name}" for v in self.k.locals] + [f"$vt{i + 1}" for i in range(self.count)]
        return [f"(local {n} v128)" for n in names]

    def loop(self) -> list[str]:
        body: list[str] = []
        for s in self.k.body:
            if isinstance(s, ir.Assign):
                body.append(f"(local.set $x_{s.var.name} {self.expr(s.value)})")
            else:
                assert isinstance(s, ir.Return)
                address = self.r.address("$out", "(local.get $gid)", 2)
                body.append(f"(v128.store {address} {self.expr(s.value)})")
        return [
            "(block $vdone (loop $veach",
            "  (br_if $vdone (i32.gt_s (i32.add (local.get $gid) (i32.const 4)) (local.get $hi)))",
            *["  " + x for x in body],
            "  (local.set $gid (i32.add (local.get $gid) (i32.const 4)))",
            "  (br $veach)))",
        ]

    # ------------------------------------------------------------------ lane-wise fallback
    @staticmethod
    def extract(v: str, t: ScalarType, lane: int) -> str:
        if t.is_float:
            return f"(f32x4.extract_lane {lane} {v})"
        x = f"(i32x4.extract_lane {lane} {v})"
        return f"(i32.and {x} (i32.const 1))" if t == T.bool else x

    def lanewise(
        self, t: ScalarType, args: list[tuple[str, ScalarType]], scalar: Callable[[list[str]], str]
    ) -> str:
        """Apply the scalar code ``scalar(args)`` to each lane and rebuild a vector of ``t``."""
        sets, temps = [], []
        for text, _ in args:
            tmp = self.vtemp()
            sets.append(f"(local.set {tmp} {text})")
            temps.append(tmp)
        values = []
        for lane in range(4):
            lane_args = [
                self.extract(f"(local.get {tmp})", at, lane)
                for tmp, (_, at) in zip(temps, args, strict=True)
            ]
            v = scalar(lane_args)
            values.append(f"(i32.sub (i32.const 0) {v})" if t == T.bool else v)
        shape = "f32x4" if t.is_float else "i32x4"
        vec = f"({shape}.splat {values[0]})"
        for lane in range(1, 4):
            vec = f"({shape}.replace_lane {lane} {vec} {values[lane]})"
        return f"(block (result v128) {' '.join(sets)} {vec})"

    # ------------------------------------------------------------------ expressions
    def splat(self, value: bool | int | float, t: ScalarType) -> str:
        if t.is_float:
            c = float_const(float(value))
            return f"(v128.const f32x4 {c} {c} {c} {c})"
        v = -1 if t == T.bool and value else int(value)
        v = v - (1 << 32) if v >= 1 << 31 else v
        return f"(v128.const i32x4 {v} {v} {v} {v})"

    def expr(self, e: ir.Expr) -> str:
        return self.visit(e)

    def visit_Const(self, e: ir.Const) -> str:
        return self.splat(e.value, e.type)

    def visit_Var(self, e: ir.Var) -> str:
        return f"(local.get $x_{e.name})"

    def visit_GlobalIndex(self, e: ir.GlobalIndex) -> str:
        return "(i32x4.add (i32x4.splat (local.get $gid)) (v128.const i32x4 0 1 2 3))"

    def visit_Unary(self, e: ir.Unary) -> str:
        x = self.expr(e.x)
        if e.op in (Op.NOT, Op.INVERT):
            return f"(v128.not {x})"
        return f"({'f32x4' if e.type.is_float else 'i32x4'}.neg {x})"

    def visit_Select(self, e: ir.Select) -> str:
        return f"(v128.bitselect {self.expr(e.a)} {self.expr(e.b)} {self.expr(e.cond)})"

    def visit_Bitcast(self, e: ir.Bitcast) -> str:
        return self.expr(e.x)

    def visit_Load(self, e: ir.Load) -> str:
        k = self.k
        spec = k.inputs[e.buffer]
        storage = self.r.storage_dtype(spec.dtype)
        if (
            isinstance(e.index, ir.GlobalIndex)
            and k.output.size <= spec.size
            and storage in _WIDE_STORAGE
        ):
            return f"(v128.load {self.r.address(f'$in{e.buffer}', '(local.get $gid)', 2)})"
        op, _, shift = MEMORY_OPS[storage]

        def gather(args: list[str]) -> str:
            index = self.r.clamp(args[0], spec.size)
            return f"({op} {self.r.address(f'$in{e.buffer}', index, shift)})"

        return self.lanewise(e.type, [(self.expr(e.index), T.i32)], gather)

    def visit_Binary(self, e: ir.Binary) -> str:
        t = e.a.type
        a, b = self.expr(e.a), self.expr(e.b)
        if t.is_float and e.op in _F32X4:
            return f"({_F32X4[e.op]} {a} {b})"
        if not t.is_float:
            if e.op in _I32X4:
                return f"({_I32X4[e.op]} {a} {b})"
            sign = "_u" if t in (T.u32, T.bool) else "_s"
            if e.op in _I32X4_SIGNED:
                return f"(i32x4.{e.op}{sign} {a} {b})"
            if e.op in (Op.SHL, Op.SHR) and isinstance(e.b, ir.Const):
                op = "shl" if e.op == Op.SHL else f"shr{sign}"
                return f"(i32x4.{op} {a} (i32.const {int(e.b.value) & 31}))"
        op = self.r.binary_op(e)
        return self.lanewise(
            e.type, [(a, e.a.type), (b, e.b.type)], lambda x: f"({op} {x[0]} {x[1]})"
        )

    def visit_Cast(self, e: ir.Cast) -> str:
        src, dst = e.x.type, e.type
        x = self.expr(e.x)
        if dst == T.bool:
            shape = "f32x4" if src.is_float else "i32x4"
            return f"({shape}.ne {x} {self.splat(0, src)})"
        if src == T.bool:
            x = f"(v128.and {x} {self.splat(1, T.i32)})"
            return f"(f32x4.convert_i32x4_u {x})" if dst.is_float else x
        if src.is_float == dst.is_float:
            return x  # i32 <-> u32
        if dst.is_float:
            return f"(f32x4.convert_i32x4_{'u' if src == T.u32 else 's'} {x})"
        if dst == T.i32:
            return f"(i32x4.trunc_sat_f32x4_s {x})"
        return self.lanewise(dst, [(x, src)], lambda v: self.r.cast(v[0], src, dst))

    def visit_Call(self, e: ir.Call) -> str:
        t = e.args[0].type
        args = [self.expr(a) for a in e.args]
        if self.r.is_native(e.fn, t):
            if e.fn in F32X4_CALLS:
                return f"({F32X4_CALLS[e.fn]} {' '.join(args)})"
            inf = self.splat(float("inf"), T.f32)
            if e.fn == "isnan":
                tmp = self.vtemp()
                return f"(f32x4.ne (local.tee {tmp} {args[0]}) (local.get {tmp}))"
            cmp = "f32x4.eq" if e.fn == "isinf" else "f32x4.lt"
            return f"({cmp} (f32x4.abs {args[0]}) {inf})"
        return self.lanewise(
            e.type,
            list(zip(args, [a.type for a in e.args], strict=True)),
            lambda v: self.r.call(e, v),
        )
