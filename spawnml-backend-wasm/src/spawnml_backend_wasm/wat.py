"""Kernel IR -> WebAssembly text (WAT).

The IR is a typed tree, so it maps directly to folded stack code. One module per kernel
specialisation imports the backend's shared linear memory and exports
``run(lo, hi, out, in0, in1, ...)``: it computes output elements ``[lo, hi)``, buffers
addressed by byte offsets passed at launch (so one compiled module serves every launch), which
lets threads split the output range. Lane-safe kernels get a 4-wide SIMD128 loop first
(``spawnml_backend_wasm.simd``) and the scalar loop handles the tail.

Loads clamp their index into the buffer (as the CPU backend's clipped gather does), so a read
the kernel does not use, such as both sides of a select, can never trap; loads the value
ranges prove inside their buffer (``Load.in_range``) read directly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import KernelTypeError
from spawnml.kernel import ir
from spawnml.kernel.ir import Op
from spawnml.kernel.polyfills import function_name
from spawnml.kernel.render import Renderer
from spawnml.kernel.traits import TargetTraits
from spawnml.kernel.types import ScalarType

T = ScalarType
VAL = {T.bool: "i32", T.i32: "i32", T.u32: "i32", T.i64: "i64", T.u64: "i64", T.f32: "f32",
       T.f16: "f32"}

# storage dtype -> (load op, store op, log2 of the element size)
MEMORY_OPS: dict[DType, tuple[str, str, int]] = {
    DType.float32: ("f32.load", "f32.store", 2),
    DType.int32: ("i32.load", "i32.store", 2),
    DType.uint32: ("i32.load", "i32.store", 2),
    DType.int64: ("i64.load", "i64.store", 3),
    DType.uint64: ("i64.load", "i64.store", 3),
    DType.int16: ("i32.load16_s", "i32.store16", 1),
    DType.uint16: ("i32.load16_u", "i32.store16", 1),
    DType.int8: ("i32.load8_s", "i32.store8", 0),
    DType.uint8: ("i32.load8_u", "i32.store8", 0),
    DType.bool: ("i32.load8_u", "i32.store8", 0),
}

_ARITH = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "bitand": "and",
    "bitor": "or",
    "bitxor": "xor",
    "shl": "shl",
    "and": "and",
    "or": "or",
    "eq": "eq",
    "ne": "ne",
}
_SIGNED = {"div": "div", "mod": "rem", "shr": "shr", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FLOAT = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "div": "div",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "eq": "eq",
    "ne": "ne",
}
_NATIVE_FLOAT = {
    "sqrt": "f32.sqrt",
    "floor": "f32.floor",
    "ceil": "f32.ceil",
    "trunc": "f32.trunc",
    "round": "f32.nearest",
    "abs": "f32.abs",
    "min": "f32.min",
    "max": "f32.max",
}
F32X4_CALLS = {  # lane-wise forms of the scalar intrinsics above, exact lane by lane
    "sqrt": "f32x4.sqrt",
    "floor": "f32x4.floor",
    "ceil": "f32x4.ceil",
    "trunc": "f32x4.trunc",
    "round": "f32x4.nearest",
    "abs": "f32x4.abs",
    "min": "f32x4.min",
    "max": "f32x4.max",
}
TRAITS = TargetTraits(
    "wasm",
    intrinsics={
        **{(fn, "float"): f"({op} {{0}})" for fn, op in _NATIVE_FLOAT.items()},
        ("min", "float"): "(f32.min {0} {1})",
        ("max", "float"): "(f32.max {0} {1})",
        ("isnan", "float"): "(f32.ne (local.tee {t} {0}) (local.get {t}))",  # {t}: a temp
        ("isinf", "float"): "(f32.eq (f32.abs {0}) (f32.const inf))",
        ("isfinite", "float"): "(f32.lt (f32.abs {0}) (f32.const inf))",
    },
    f16_arithmetic=False,  # f16 computes as f32, rounded by the round_f16 polyfill
    vector_width=4,  # SIMD128: a register tile's innermost copies as f32x4
    vector_calls=frozenset(F32X4_CALLS),
    strided_vector_loads=2,  # two v128 loads and a shuffle (the memory keeps 16 bytes spare)
)
# A 2-lane vector lives in the low half of a v128 (its upper lanes are never read).
_VECTOR_LOAD = {4: "v128.load", 2: "v128.load64_zero"}
_VECTOR_STORE = {4: "v128.store", 2: "v128.store64_lane 0"}
# lanes 0 and 2 of each operand: the even f32 lanes of two v128 (a stride-2 load)
_EVEN_LANES = "0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27"
"""Wasm has only these float operations; every other intrinsic is a kernel-language polyfill."""

_HELPER = re.compile(r"^  \(func \$(\S+)")


@dataclass(frozen=True)
class WatKernel:
    """A kernel's module in parts: its polyfill functions and its ``$run`` function, each the
    text of one top-level ``(func ...)`` (two-space indent, as printed). ``module()`` is what
    the backend compiles; whole-plan modules (``spawnml_backend_wasm.link``) take the parts
    of several kernels into one module."""

    title: str
    helpers: tuple[str, ...]
    run: str

    def module(self) -> str:
        return "\n".join([
            f";; {self.title}",
            "(module",
            '  (import "env" "memory" (memory 1 65536 shared))',
            *self.helpers,
            self.run,
            '  (export "run" (func $run))',
            ")",
        ]) + "\n"

    @classmethod
    def parse(cls, text: str) -> WatKernel:
        """The parts of a module printed by ``module()``."""
        lines = text.rstrip("\n").split("\n")
        if len(lines) < 6 or lines[1] != "(module" or lines[-1] != ")":
            raise ValueError("not a spawnml wasm kernel module")
        funcs: list[list[str]] = []
        for line in lines[3:-2]:
            if line.startswith("  (func "):
                funcs.append([line])
            else:
                funcs[-1].append(line)
        texts = ["\n".join(f) for f in funcs]
        if not texts or not texts[-1].startswith("  (func $run "):
            raise ValueError("the module has no $run function")
        return cls(lines[0].removeprefix(";; "), tuple(texts[:-1]), texts[-1])

    @staticmethod
    def helper_name(text: str) -> str:
        match = _HELPER.match(text)
        assert match is not None
        return match.group(1)


def float_const(v: float) -> str:
    """An exact f32 literal (hex float; nan and inf by name)."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(np.float32(v)).hex()


def const_text(value: bool | int | float, t: ScalarType) -> str:
    if t.is_float:
        return f"(f32.const {float_const(float(value))})"
    bits = 64 if VAL[t] == "i64" else 32
    v = int(value)
    return f"({VAL[t]}.const {v - (1 << bits) if v >= 1 << (bits - 1) else v})"


def _unsigned(t: ScalarType) -> bool:
    return t in (T.u32, T.u64, T.bool)


def cast_ops(src: ScalarType, dst: ScalarType) -> list[str]:
    """Instructions converting a value of ``src`` to ``dst`` (applied innermost first)."""
    s, d = src, dst
    if d == T.bool:
        raise AssertionError("casts to bool are rendered as comparisons")
    if VAL[s] == VAL[d] and not (s.is_float != d.is_float):
        return []
    sign = "u" if _unsigned(s) else "s"
    if d.is_float:
        return [f"f32.convert_{VAL[s]}_{sign}"]
    if s.is_float:
        if VAL[d] == "i64":
            return [f"i64.trunc_sat_f32_{'u' if _unsigned(d) else 's'}"]
        if d == T.u32:  # wraps like numpy for values in int64 range
            return ["i64.trunc_sat_f32_s", "i32.wrap_i64"]
        return ["i32.trunc_sat_f32_s"]
    if VAL[d] == "i64":  # C: a 32-bit value widens by its own signedness
        return [f"i64.extend_i32_{sign}"]
    return ["i32.wrap_i64"]  # i64/u64 -> i32/u32


class WasmRenderer(Renderer):
    """Prints a lowered kernel as one WAT module (SIMD128 where lane-safe)."""

    name = "wasm"
    traits = TRAITS
    simd: bool = True
    lanes: dict[str, tuple[str, int]] = {}  # noqa: RUF012 - per kernel: lane -> (vector, lane)

    # ------------------------------------------------------------------ module
    def print_kernel(self, k: ir.KernelIR) -> str:
        from .simd import VectorBody, lane_safe

        self.kernel = k
        self.temps: list[tuple[str, str]] = []
        functions = [self.render_function(f) for f in k.functions]
        self.kernel = k
        self.temps = []
        self.in_function = False
        self.labels = 0
        n = k.size
        params = " ".join(
            ["(param $lo i32) (param $hi i32) (param $out i32)"]
            + [f"(param $in{i} i32)" for i in range(len(k.inputs))]
        )
        locals_ = [f"(local $v_{v.name} {VAL[v.type]})" for v in k.locals]
        resets = [f"(local.set $v_{v.name} {const_text(0, v.type)})" for v in k.locals]
        self.lanes = {lane: (v.name, j) for v in k.vectors for j, lane in enumerate(v.lane_names)}
        locals_ += [f"(local $v_{v.name} v128)" for v in k.vectors]
        resets += [f"(local.set $v_{v.name} (v128.const i32x4 0 0 0 0))" for v in k.vectors]
        body = self.block(k.body)
        vector: list[str] = []
        if self.simd and lane_safe(k, self.storage_dtype):
            vb = VectorBody(self, k)
            vector = vb.loop()
            locals_ += vb.locals()
        run = [
            f"  (func $run {params}",
            "    (local $gid i32) "
            + " ".join(locals_ + [f"(local {n_} {t})" for n_, t in self.temps]),
            f"    (if (i32.gt_s (local.get $hi) (i32.const {n}))",
            f"      (then (local.set $hi (i32.const {n}))))",
            "    (local.set $gid (local.get $lo))",
            *["    " + x for x in vector],
            "    (block $done (loop $each",
            "      (br_if $done (i32.ge_s (local.get $gid) (local.get $hi)))",
            "      (block $next",
            *["        " + x for x in resets + body],
            "      )",
            "      (local.set $gid (i32.add (local.get $gid) (i32.const 1)))",
            "      (br $each)))",
            "  )",
        ]
        return WatKernel(f"{k.name} from {k.source} [{k.key}]", functions,
                         "\n".join(run)).module()

    def render_function(self, f: ir.Function) -> str:
        self.kernel = None  # type: ignore[assignment]
        self.temps = []
        self.lanes = {}
        self.in_function = True
        self.labels = 0
        body = self.block(f.body)
        params = " ".join(f"(param $v_{p.name} {VAL[p.type]})" for p in f.params)
        locals_ = [f"(local $v_{v.name} {VAL[v.type]})" for v in f.locals]
        locals_ += [f"(local {n} {t})" for n, t in self.temps]
        lines = [f"  (func ${f.name} {params} (result {VAL[f.ret]}) {' '.join(locals_)}"]
        lines += ["    " + x for x in body] + ["    unreachable)"]
        return "\n".join(lines)

    def temp(self, t: str) -> str:
        name = f"$t{len(self.temps)}"
        self.temps.append((name, t))
        return name

    # ------------------------------------------------------------------ statements
    def block(self, stmts: tuple[ir.Stmt, ...]) -> list[str]:
        return [line for s in stmts for line in self.visit(s)]

    def visit_Assign(self, s: ir.Assign) -> list[str]:
        if s.var.name in self.lanes:  # one lane of a vector
            vec, j = self.lanes[s.var.name]
            value = f"(f32x4.replace_lane {j} (local.get $v_{vec}) {self.expr(s.value)})"
            return [f"(local.set $v_{vec} {value})"]
        return [f"(local.set $v_{s.var.name} {self.expr(s.value)})"]

    # ------------------------------------------------------------------ vectors (f32x4)
    def visit_VecAssign(self, s: ir.VecAssign) -> list[str]:
        return [f"(local.set $v_{s.name} {self.expr(s.value)})"]

    def visit_VecStore(self, s: ir.VecStore) -> list[str]:
        where = self.clamp(self.expr(s.index), self.kernel.output.size - s.value.lanes + 1)
        op = _VECTOR_STORE[s.value.lanes]
        return [f"({op} {self.address('$out', where, 2)} {self.expr(s.value)})"]

    def visit_VecRef(self, e: ir.VecRef) -> str:
        return f"(local.get $v_{e.name})"

    def visit_VecSplat(self, e: ir.VecSplat) -> str:
        return f"(f32x4.splat {self.expr(e.x)})"

    def visit_VecLanes(self, e: ir.VecLanes) -> str:
        text = f"(f32x4.splat {self.expr(e.xs[0])})"
        for j, x in enumerate(e.xs[1:], 1):
            text = f"(f32x4.replace_lane {j} {text} {self.expr(x)})"
        return text

    def visit_VecLoad(self, e: ir.VecLoad) -> str:
        span = e.stride * (e.lanes - 1) + 1  # elements from the first lane to the last
        size = self.kernel.inputs[e.buffer].size - span + 1
        index = self.expr(e.index) if e.in_range else self.clamp(self.expr(e.index), size)
        where = self.address(f"$in{e.buffer}", index, 2)
        if e.stride == 1:
            return f"({_VECTOR_LOAD[e.lanes]} {where})"
        # stride 2: load the span (at most one element past the last lane: the memory keeps
        # 16 bytes after every buffer) and keep the even lanes
        if e.lanes == 2:
            t = self.temp("v128")
            return f"(i8x16.shuffle {_EVEN_LANES} (local.tee {t} (v128.load {where})) " \
                   f"(local.get {t}))"
        t = self.temp("i32")
        return (f"(i8x16.shuffle {_EVEN_LANES} (v128.load (local.tee {t} {where})) "
                f"(v128.load offset=16 (local.get {t})))")

    def visit_VecBinary(self, e: ir.VecBinary) -> str:
        return f"(f32x4.{_FLOAT[e.op]} {self.expr(e.a)} {self.expr(e.b)})"

    def visit_VecCall(self, e: ir.VecCall) -> str:
        return f"({F32X4_CALLS[e.fn]} {' '.join(self.expr(a) for a in e.args)})"

    def visit_Return(self, s: ir.Return) -> list[str]:
        if self.in_function:
            return [f"(return {self.expr(s.value)})"]
        return [self.store(s.value), "(br $next)"]

    def visit_Store(self, s: ir.Store) -> list[str]:
        return [self.store(s.value, s.index)]

    def visit_If(self, s: ir.If) -> list[str]:
        out = [f"(if {self.expr(s.cond)} (then", *["  " + x for x in self.block(s.then)]]
        if s.orelse:
            out += [") (else", *["  " + x for x in self.block(s.orelse)]]
        return [*out, "))"]

    def visit_For(self, s: ir.For) -> list[str]:
        return self.loop(s)

    def loop(self, s: ir.For) -> list[str]:
        """``range(start, stop, step)`` with a hidden counter, so the body may assign ``var``."""
        vt = VAL[s.var.type]
        i, stop = self.temp(vt), self.temp(vt)
        self.labels += 1
        b, lp = f"$b{self.labels}", f"$l{self.labels}"
        sign = "_u" if _unsigned(s.var.type) else "_s"
        done = f"{vt}.ge{sign}" if s.step > 0 else f"{vt}.le{sign}"
        return [
            f"(local.set {i} {self.expr(s.start)})",
            f"(local.set {stop} {self.expr(s.stop)})",
            f"(block {b} (loop {lp}",
            f"  (br_if {b} ({done} (local.get {i}) (local.get {stop})))",
            f"  (local.set $v_{s.var.name} (local.get {i}))",
            *["  " + x for x in self.block(s.body)],
            f"  (local.set {i} ({vt}.add (local.get {i}) ({vt}.const {s.step})))",
            f"  (br {lp})))",
        ]

    def store(self, value: ir.Expr, index: ir.Expr | None = None) -> str:
        """Write output element ``index`` (clamped; the invocation's own by default)."""
        k = self.kernel
        storage = self.storage_dtype(k.output.dtype)
        _, op, shift = MEMORY_OPS[storage]
        text = self.expr(value)
        if VAL[value.type] == "i64" and not op.startswith("i64"):
            text = f"(i32.wrap_i64 {text})"
        where = "(local.get $gid)" if index is None else self.clamp(
            self.expr(index), k.output.size)
        return f"({op} {self.address('$out', where, shift)} {text})"

    @staticmethod
    def address(base: str, index: str, shift: int) -> str:
        scaled = index if shift == 0 else f"(i32.shl {index} (i32.const {shift}))"
        return f"(i32.add (local.get {base}) {scaled})"

    # ------------------------------------------------------------------ expressions
    def clamped_index(self, e: ir.Load) -> str:
        k = self.kernel
        size = k.inputs[e.buffer].size
        if isinstance(e.index, ir.GlobalIndex) and k.output.size <= size:
            return "(local.get $gid)"
        if e.in_range:  # proven by the value ranges
            return self.expr(e.index)
        return self.clamp(self.expr(e.index), size)

    def clamp(self, index: str, size: int) -> str:
        """``index`` limited to [0, size - 1]."""
        t = self.temp("i32")
        top = max(size - 1, 0)
        inner = (
            f"(select (i32.const {top}) (local.tee {t} {index}) "
            f"(i32.gt_s (local.get {t}) (i32.const {top})))"
        )
        return f"(select (i32.const 0) {inner} (i32.lt_s (local.get {t}) (i32.const 0)))"

    def expr(self, e: ir.Expr) -> str:
        return self.visit(e)

    def visit_Const(self, e: ir.Const) -> str:
        return const_text(e.value, e.type)

    def visit_Var(self, e: ir.Var) -> str:
        if e.name in self.lanes:
            vec, j = self.lanes[e.name]
            return f"(f32x4.extract_lane {j} (local.get $v_{vec}))"
        return f"(local.get $v_{e.name})"

    def visit_GlobalIndex(self, e: ir.GlobalIndex) -> str:
        return "(local.get $gid)"

    def visit_Load(self, e: ir.Load) -> str:
        storage = self.storage_dtype(self.kernel.inputs[e.buffer].dtype)
        op, _, shift = MEMORY_OPS[storage]
        value = f"({op} {self.address(f'$in{e.buffer}', self.clamped_index(e), shift)})"
        return value if op.startswith(VAL[e.type]) else f"(i64.extend_i32_s {value})"

    def visit_Unary(self, e: ir.Unary) -> str:
        x = self.expr(e.x)
        if e.op == Op.NOT:
            return f"(i32.eqz {x})"
        if e.op == Op.INVERT:
            return f"({VAL[e.type]}.xor {x} ({VAL[e.type]}.const -1))"
        if e.type.is_float:
            return f"(f32.neg {x})"
        return f"({VAL[e.type]}.sub ({VAL[e.type]}.const 0) {x})"

    def visit_Binary(self, e: ir.Binary) -> str:
        return f"({self.binary_op(e)} {self.expr(e.a)} {self.expr(e.b)})"

    def visit_Select(self, e: ir.Select) -> str:
        return f"(select {self.expr(e.a)} {self.expr(e.b)} {self.expr(e.cond)})"

    def visit_Cast(self, e: ir.Cast) -> str:
        return self.cast(self.expr(e.x), e.x.type, e.type)

    def visit_Bitcast(self, e: ir.Bitcast) -> str:
        x = self.expr(e.x)
        if e.type.is_float:
            return f"(f32.reinterpret_i32 {x})"
        return f"(i32.reinterpret_f32 {x})" if e.x.type.is_float else x

    def visit_Call(self, e: ir.Call) -> str:
        return self.call(e, [self.expr(a) for a in e.args])

    def cast(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        if dst == T.bool:
            return f"({VAL[src]}.ne {x} {const_text(0, src)})"
        for op in cast_ops(src, dst):
            x = f"({op} {x})"
        return x

    def binary_op(self, e: ir.Binary) -> str:
        t = e.a.type
        vt = VAL[t]
        if e.op in ("div", "mod") and t.is_int and not self.in_function:
            b = e.b
            if not (isinstance(b, ir.Const) and b.value not in (0, -1)):
                raise KernelTypeError(
                    f"wasm: integer {e.op} by a non-constant divisor reached the "
                    "renderer; it must go through floordiv/truncdiv (would trap)"
                )
        if t.is_float:
            if e.op not in _FLOAT:
                raise KernelTypeError(f"wasm: float operator {e.op!r}")
            return f"f32.{_FLOAT[e.op]}"
        if e.op in _ARITH:
            return f"{vt}.{_ARITH[e.op]}"
        return f"{vt}.{_SIGNED[e.op]}{'_u' if _unsigned(t) else '_s'}"

    def call(self, e: ir.Call, args: list[str]) -> str:
        t = e.args[0].type
        tpl = self.traits.native(e.fn, t)
        if tpl is not None:
            return tpl.format(*args, t=self.temp("f32") if "{t}" in tpl else "")
        return f"(call ${function_name(e.fn, t)} {' '.join(args)})"
