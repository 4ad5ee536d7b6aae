"""Kernel IR -> LLVM IR text (the cpu backend's native path, compiled by ``jit``).

One module per kernel specialisation defines ``void run(i64 lo, i64 hi, ptr buffers)``: it
computes invocations ``[lo, hi)``; ``buffers`` holds the output's address, then each input's,
so one compiled function serves every launch and threads split the invocation range.

Every IR variable lives in an ``alloca`` of the entry block (LLVM's mem2reg makes them SSA
values); each statement appends instructions to the current basic block. The semantics are
the WebAssembly target's, which the conformance matrix holds to the ONNX references: loads
clamp their index into the buffer unless the value ranges prove it inside (``Load.in_range``),
float-to-int conversions saturate, shift counts wrap, float ``min``/``max`` propagate NaN,
and every other math intrinsic is the kernel language's own polyfill (so LLVM may vectorise
it). A register tile's vectors (``spawnml.kernel.vectorize``) become ``<N x float>`` values.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import KernelTypeError
from spawnml.kernel import ir
from spawnml.kernel.analysis import calls
from spawnml.kernel.ir import Op
from spawnml.kernel.polyfills import function_name
from spawnml.kernel.render import Renderer
from spawnml.kernel.traits import TargetTraits, table
from spawnml.kernel.types import ScalarType

T = ScalarType
TYPE = {T.bool: "i1", T.i32: "i32", T.u32: "i32", T.i64: "i64", T.u64: "i64",
        T.f32: "float", T.f16: "float", T.bf16: "float"}
_UNSIGNED = (T.u32, T.u64, T.bool)

# storage dtype -> (LLVM memory type, signed integer)
MEMORY: dict[DType, tuple[str, bool]] = {
    DType.float32: ("float", True), DType.float64: ("double", True),
    DType.float16: ("half", True), DType.int8: ("i8", True), DType.uint8: ("i8", False),
    DType.int16: ("i16", True), DType.uint16: ("i16", False), DType.int32: ("i32", True),
    DType.uint32: ("i32", False), DType.int64: ("i64", True), DType.uint64: ("i64", False),
    DType.bool: ("i8", False),
}
_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}

_INT_OPS = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.BITAND: "and", Op.BITOR: "or",
            Op.BITXOR: "xor", Op.AND: "and", Op.OR: "or", Op.SHL: "shl"}
_SIGNED_OPS = {Op.DIV: ("sdiv", "udiv"), Op.MOD: ("srem", "urem"), Op.SHR: ("ashr", "lshr"),
               Op.LT: ("icmp slt", "icmp ult"), Op.LE: ("icmp sle", "icmp ule"),
               Op.GT: ("icmp sgt", "icmp ugt"), Op.GE: ("icmp sge", "icmp uge"),
               Op.EQ: ("icmp eq", "icmp eq"), Op.NE: ("icmp ne", "icmp ne")}
_FLOAT_OPS = {Op.ADD: "fadd", Op.SUB: "fsub", Op.MUL: "fmul", Op.DIV: "fdiv",
              Op.LT: "fcmp olt", Op.LE: "fcmp ole", Op.GT: "fcmp ogt", Op.GE: "fcmp oge",
              Op.EQ: "fcmp oeq", Op.NE: "fcmp une"}

# intrinsic -> the LLVM intrinsic computing it exactly on floats (vectors too: ``.v8f32``)
FLOAT_INTRINSICS = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
                    "round": "rint", "abs": "fabs", "min": "minimum", "max": "maximum"}
_INT_MINMAX = {("min", True): "smin", ("min", False): "umin", ("max", True): "smax",
               ("max", False): "umax"}


def traits(vector_width: int) -> TargetTraits:
    """The native target's traits for the host's ``vector_width`` f32 lanes."""
    return TargetTraits(
        "cpu-native",
        intrinsics={
            **table(dict.fromkeys(FLOAT_INTRINSICS, "llvm"), "float"),
            **table({"min": "llvm", "max": "llvm"}, "int"),
            **table(dict.fromkeys(("isnan", "isinf", "isfinite", "fmod"), "llvm"), "float"),
        },
        f16_arithmetic=False,  # f16 computes as f32, rounded by the round_f16 polyfill
        vector_width=vector_width,
        vector_calls=frozenset(FLOAT_INTRINSICS),
        strided_vector_loads=2,  # loads the span and keeps the even lanes (CPUBackend
    )                            # allocates SPARE_BYTES after every buffer for that)


def float_const(v: float) -> str:
    """An f32 value as LLVM spells float constants: the hex of its exact double."""
    if math.isnan(v):
        return "0x7FF8000000000000"
    return "0x" + struct.pack(">d", float(np.float32(v))).hex().upper()


class LLVMRenderer(Renderer):
    """Prints a lowered kernel as one LLVM module exporting ``run``."""

    name = "cpu-native"

    def __init__(self, storage_dtype: Callable[[DType], DType], vector_width: int = 8) -> None:
        super().__init__(storage_dtype)
        self.traits = traits(vector_width)  # type: ignore[misc]

    # ------------------------------------------------------------------ module
    def print_kernel(self, k: ir.KernelIR) -> str:
        # Kernels of 16-bit floats keep their sums exact in order: a fused multiply-add
        # moves a result across a rounding boundary of the narrow type (an f16 ulp) where
        # the reference, computed in order, does not.
        narrow = (DType.float16, DType.bfloat16)
        self.exact_sums = (any(self.storage_dtype(b.dtype) in narrow or b.dtype in narrow
                               for b in (*k.inputs, k.output))
                           or calls(k, "round_f16") or calls(k, "round_bf16"))
        declares: set[str] = set()
        self.declares = declares
        functions = [self.function(f) for f in k.functions]
        self.declares = declares
        self.begin(k, in_function=False)
        self.lanes = {lane: (v.name, j, len(v.lane_names))
                      for v in k.vectors for j, lane in enumerate(v.lane_names)}
        for v in k.locals:
            self.slot(v.name, TYPE[v.type])
        for v in k.vectors:
            self.slot(v.name, f"<{len(v.lane_names)} x float>")
        self.emit("br label %each")
        self.label("each")  # an i32 induction variable that never wraps: LLVM vectorises
        self.emit("%gid = phi i32 [ %lo, %entry ], [ %next, %latch ]")
        self.emit("%more = icmp slt i32 %gid, %hi")
        self.emit("br i1 %more, label %body, label %done")
        self.label("body")
        for v in k.locals:
            self.emit(f"store {TYPE[v.type]} {self.zero(TYPE[v.type])}, ptr %v.{v.name}")
        for v in k.vectors:
            self.emit(f"store <{len(v.lane_names)} x float> zeroinitializer, ptr %v.{v.name}")
        self.block(k.body)
        self.emit("br label %latch")
        self.label("latch")
        self.emit("%next = add nsw i32 %gid, 1")
        self.emit("br label %each")
        self.label("done")
        self.emit("ret void")
        # The output never shares memory with an input (as on every target): ``noalias``
        # lets LLVM vectorise loops whose gathers it cannot bound.
        pointers = ["ptr noalias %out", *(f"ptr noalias %in{i}" for i in range(len(k.inputs)))]
        body = [f"define internal void @body(i32 %lo, i32 %hi, {', '.join(pointers)}) #0 {{",
                "entry:", *self.entry, *self.lines, "}"]
        loads, args = [], ["ptr %out"]
        for i in range(len(k.inputs)):
            loads += [f"  %in{i}.at = getelementptr ptr, ptr %buffers, i64 {i + 1}",
                      f"  %in{i} = load ptr, ptr %in{i}.at"]
            args.append(f"ptr %in{i}")
        run = ["define void @run(i64 %lo, i64 %hi, ptr %buffers) #0 {", "entry:",
               "  %lo32 = trunc i64 %lo to i32", "  %hi32 = trunc i64 %hi to i32",
               "  %out = load ptr, ptr %buffers", *loads,
               f"  call void @body(i32 %lo32, i32 %hi32, {', '.join(args)})", "  ret void", "}"]
        return "\n".join([
            f"; {k.name} from {k.source} [{k.key}]",
            *sorted(declares), *functions, *body, *run,
            'attributes #0 = { nounwind "no-trapping-math"="true" }', "",
        ])

    def function(self, f: ir.Function) -> str:
        self.begin(None, in_function=True)
        self.lanes = {}
        params = []
        for p in f.params:
            params.append(f"{TYPE[p.type]} %p.{p.name}")
            self.slot(p.name, TYPE[p.type])
            self.entry.append(f"  store {TYPE[p.type]} %p.{p.name}, ptr %v.{p.name}")
        for v in f.locals:
            if v.name not in {p.name for p in f.params}:
                self.slot(v.name, TYPE[v.type])
        self.block(f.body)
        self.emit("unreachable")
        head = f"define internal {TYPE[f.ret]} @{f.name}({', '.join(params)}) #0 {{"
        return "\n".join([head, "entry:", *self.entry, *self.lines, "}"])

    def begin(self, k: ir.KernelIR | None, in_function: bool) -> None:
        self.kernel = k  # type: ignore[assignment]
        self.in_function = in_function
        self.entry: list[str] = []  # allocas (entry block)
        self.lines: list[str] = []
        self.counter = 0
        self.loops = 0  # depth of the For loops around the statement being printed
        self.slots: set[str] = set()

    def slot(self, name: str, llvm_type: str) -> None:
        if name not in self.slots:
            self.slots.add(name)
            self.entry.append(f"  %v.{name} = alloca {llvm_type}")

    # ------------------------------------------------------------------ emission helpers
    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def fresh(self, stem: str = "t") -> str:
        self.counter += 1
        return f"%{stem}{self.counter}"

    def value(self, text: str, stem: str = "t") -> str:
        """Emit ``%x = text``; return ``%x``."""
        name = self.fresh(stem)
        self.emit(f"{name} = {text}")
        return name

    def jump_away(self, target: str) -> None:
        """A branch that ends the block; what follows lands in an unreachable block."""
        self.emit(f"br label %{target}")
        self.label(self.fresh("dead")[1:])

    @staticmethod
    def zero(llvm_type: str) -> str:
        return "0.0" if llvm_type in _FLOAT_BITS else ("false" if llvm_type == "i1" else "0")

    def intrinsic(self, name: str, ret: str, args: Sequence[tuple[str, str]]) -> str:
        """Call ``llvm.<name>`` (declared once per module)."""
        suffix = {"float": "f32", "i32": "i32", "i64": "i64"}.get(ret)
        if suffix is None:  # a vector <N x float>
            suffix = f"v{ret.split()[0][1:]}f32"
        fn = f"@llvm.{name}.{suffix}"
        if name.endswith(".sat"):  # fptosi.sat.<int>.<float>
            fn = f"@llvm.{name}.{ret}.f32"
        self.declares.add(f"declare {ret} {fn}({', '.join(t for t, _ in args)})")
        return self.value(f"call {ret} {fn}({', '.join(f'{t} {v}' for t, v in args)})")

    # ------------------------------------------------------------------ statements
    def block(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            self.visit(s)

    def visit_Assign(self, s: ir.Assign) -> None:
        v = self.accumulation(s.var.name, s.value) or self.expr(s.value)
        if s.var.name in self.lanes:  # one lane of a vector
            vec, j, n = self.lanes[s.var.name]
            vt = f"<{n} x float>"
            old = self.value(f"load {vt}, ptr %v.{vec}")
            new = self.value(f"insertelement {vt} {old}, float {v}, i32 {j}")
            self.emit(f"store {vt} {new}, ptr %v.{vec}")
            return
        self.emit(f"store {TYPE[s.var.type]} {v}, ptr %v.{s.var.name}")

    def accumulation(self, name: str, e: ir.Expr | ir.VecExpr) -> str | None:
        """``name = name + x`` or ``name + a * b`` (float, scalar or vector) inside a loop: a
        sum whose multiply-add LLVM may contract into one fused multiply-add, as BLAS does.
        Not reassociated: LLVM would split a sum into partial sums in a loop's scalar
        remainder but not in its vector body, so an output's bits would depend on where a
        launch's range starts (threads, batch size). None otherwise."""
        binary = (ir.Binary, ir.VecBinary)
        if not (self.loops and isinstance(e, binary) and e.op == Op.ADD and e.type.is_float):
            return None
        if self.exact_sums:
            return None
        own = [isinstance(x, (ir.Var, ir.VecRef)) and x.name == name for x in (e.a, e.b)]
        if not any(own):
            return None
        acc, other = (e.a, e.b) if own[0] else (e.b, e.a)
        t = f"<{e.lanes} x float>" if isinstance(e, ir.VecBinary) else "float"
        if isinstance(other, binary) and other.op == Op.MUL:
            a, b = self.expr(other.a), self.expr(other.b)
            x = self.value(f"fmul contract {t} {a}, {b}")
        else:
            x = self.expr(other)
        return self.value(f"fadd contract {t} {self.expr(acc)}, {x}")

    def visit_If(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        n = self.fresh("if")[1:]
        self.emit(f"br i1 {cond}, label %{n}.then, label %{n}.else")
        self.label(f"{n}.then")
        self.block(s.then)
        self.emit(f"br label %{n}.end")
        self.label(f"{n}.else")
        self.block(s.orelse)
        self.emit(f"br label %{n}.end")
        self.label(f"{n}.end")

    def visit_For(self, s: ir.For) -> None:
        """``range(start, stop, step)`` with a hidden counter, so the body may assign ``var``."""
        vt = TYPE[s.var.type]
        n = self.fresh("for")[1:]
        self.slot(f"{n}.i", vt)
        start, stop = self.expr(s.start), self.expr(s.stop)
        self.emit(f"store {vt} {start}, ptr %v.{n}.i")
        self.emit(f"br label %{n}.head")
        self.label(f"{n}.head")
        i = self.value(f"load {vt}, ptr %v.{n}.i")
        sign = "u" if s.var.type in _UNSIGNED else "s"
        test = f"{sign}lt" if s.step > 0 else f"{sign}gt"
        go = self.value(f"icmp {test} {vt} {i}, {stop}")
        self.emit(f"br i1 {go}, label %{n}.body, label %{n}.end")
        self.label(f"{n}.body")
        self.emit(f"store {vt} {i}, ptr %v.{s.var.name}")
        self.loops += 1
        self.block(s.body)
        self.loops -= 1
        step = self.value(f"add {vt} {i}, {s.step}")
        self.emit(f"store {vt} {step}, ptr %v.{n}.i")
        self.emit(f"br label %{n}.head")
        self.label(f"{n}.end")

    def visit_Return(self, s: ir.Return) -> None:
        v = self.expr(s.value)
        if self.in_function:
            self.emit(f"ret {TYPE[s.value.type]} {v}")
            self.label(self.fresh("dead")[1:])
            return
        self.store(s.value.type, v, "%gid")
        self.jump_away("latch")

    def visit_Store(self, s: ir.Store) -> None:
        v = self.expr(s.value)
        self.store(s.value.type, v, self.clamp(self.expr(s.index), self.kernel.output.size))

    def store(self, t: ScalarType, v: str, index: str) -> None:
        """Write ``v`` (of type ``t``) to output element ``index`` in its storage type."""
        mem = MEMORY[self.storage_dtype(self.kernel.output.dtype)][0]
        v = self.convert(v, TYPE[t], t not in _UNSIGNED, mem)
        at = self.value(f"getelementptr {mem}, ptr %out, i32 {index}")
        self.emit(f"store {mem} {v}, ptr {at}")

    def convert(self, v: str, src: str, signed: bool, dst: str) -> str:
        """A value of LLVM type ``src`` as type ``dst`` (storage conversions)."""
        if src == dst:
            return v
        if src in _FLOAT_BITS and dst in _FLOAT_BITS:
            op = "fpext" if _FLOAT_BITS[dst] > _FLOAT_BITS[src] else "fptrunc"
            return self.value(f"{op} {src} {v} to {dst}")
        if src in _BITS and dst in _BITS:
            if dst == "i1":
                return self.value(f"icmp ne {src} {v}, 0")
            if _BITS[dst] < _BITS[src]:
                return self.value(f"trunc {src} {v} to {dst}")
            ext = "sext" if signed and src != "i1" else "zext"
            return self.value(f"{ext} {src} {v} to {dst}")
        raise KernelTypeError(f"cpu-native: no storage conversion from {src} to {dst}")

    # ------------------------------------------------------------------ vectors
    def visit_VecAssign(self, s: ir.VecAssign) -> None:
        v = self.accumulation(s.name, s.value) or self.expr(s.value)
        self.emit(f"store <{s.value.lanes} x float> {v}, ptr %v.{s.name}")

    def visit_VecStore(self, s: ir.VecStore) -> None:
        self.need_f32_vectors(self.kernel.output)
        lanes = s.value.lanes
        v = self.expr(s.value)
        index = self.clamp(self.expr(s.index), self.kernel.output.size - lanes + 1)
        at = self.value(f"getelementptr float, ptr %out, i32 {index}")
        self.emit(f"store <{lanes} x float> {v}, ptr {at}, align 4")

    def visit_VecRef(self, e: ir.VecRef) -> str:
        return self.value(f"load <{e.lanes} x float>, ptr %v.{e.name}")

    def visit_VecSplat(self, e: ir.VecSplat) -> str:
        return self.lanes_of([self.expr(e.x)] * e.lanes)

    def visit_VecLanes(self, e: ir.VecLanes) -> str:
        return self.lanes_of([self.expr(x) for x in e.xs])

    def lanes_of(self, xs: list[str]) -> str:
        vt, v = f"<{len(xs)} x float>", "poison"
        for j, x in enumerate(xs):
            v = self.value(f"insertelement {vt} {v}, float {x}, i32 {j}")
        return v

    def visit_VecLoad(self, e: ir.VecLoad) -> str:
        spec = self.kernel.inputs[e.buffer]
        self.need_f32_vectors(spec)
        span = e.stride * (e.lanes - 1) + 1  # elements from the first lane to the last
        index = self.expr(e.index)
        if not e.in_range:
            index = self.clamp(index, spec.size - span + 1)
        at = self.value(f"getelementptr float, ptr %in{e.buffer}, i32 {index}")
        if e.stride == 1:
            return self.value(f"load <{e.lanes} x float>, ptr {at}, align 4")
        if e.stride != 2:
            raise KernelTypeError(f"cpu-native: vector loads of stride {e.stride}")
        # the span and one element past it (readable: the buffer's spare bytes), even lanes
        wide = self.value(f"load <{2 * e.lanes} x float>, ptr {at}, align 4")
        even = ", ".join(f"i32 {2 * j}" for j in range(e.lanes))
        return self.value(f"shufflevector <{2 * e.lanes} x float> {wide}, "
                          f"<{2 * e.lanes} x float> poison, <{e.lanes} x i32> <{even}>")

    def visit_VecBinary(self, e: ir.VecBinary) -> str:
        if e.op not in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
            raise KernelTypeError(f"cpu-native: vector operator {e.op!r}")
        a, b = self.expr(e.a), self.expr(e.b)
        return self.value(f"{_FLOAT_OPS[e.op]} <{e.lanes} x float> {a}, {b}")

    def visit_VecCall(self, e: ir.VecCall) -> str:
        vt = f"<{e.lanes} x float>"
        args = [(vt, self.expr(a)) for a in e.args]
        return self.intrinsic(FLOAT_INTRINSICS[e.fn], vt, args)

    def need_f32_vectors(self, spec: ir.BufferSpec) -> None:
        if MEMORY[self.storage_dtype(spec.dtype)][0] != "float":
            raise KernelTypeError(f"cpu-native: vectors of {spec.dtype} storage")

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr | ir.VecExpr) -> str:
        return self.visit(e)  # type: ignore[no-any-return]

    def visit_Const(self, e: ir.Const) -> str:
        if e.type == T.bool:
            return "true" if e.value else "false"
        if e.type.is_float:
            return float_const(float(e.value))
        bits = _BITS[TYPE[e.type]]
        v = int(e.value) & ((1 << bits) - 1)
        return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)

    def visit_Var(self, e: ir.Var) -> str:
        if e.name in self.lanes:
            vec, j, n = self.lanes[e.name]
            whole = self.value(f"load <{n} x float>, ptr %v.{vec}")
            return self.value(f"extractelement <{n} x float> {whole}, i32 {j}")
        return self.value(f"load {TYPE[e.type]}, ptr %v.{e.name}")

    def visit_GlobalIndex(self, e: ir.GlobalIndex) -> str:
        return "%gid"

    def visit_Load(self, e: ir.Load) -> str:
        k = self.kernel
        spec = k.inputs[e.buffer]
        mem, signed = MEMORY[self.storage_dtype(spec.dtype)]
        if isinstance(e.index, ir.GlobalIndex) and not k.tile and k.output.size <= spec.size:
            index = "%gid"
        elif e.in_range:
            index = self.expr(e.index)
        else:
            index = self.clamp(self.expr(e.index), spec.size)
        at = self.value(f"getelementptr {mem}, ptr %in{e.buffer}, i32 {index}")
        raw = self.value(f"load {mem}, ptr {at}")
        return self.convert(raw, mem, signed, TYPE[e.type])

    def clamp(self, index: str, size: int) -> str:
        """``index`` limited to [0, size - 1]."""
        top = self.intrinsic("smin", "i32", [("i32", index), ("i32", str(max(size - 1, 0)))])
        return self.intrinsic("smax", "i32", [("i32", top), ("i32", "0")])

    def visit_Unary(self, e: ir.Unary) -> str:
        x, t = self.expr(e.x), TYPE[e.type]
        if e.op == Op.NOT:
            return self.value(f"xor i1 {x}, true")
        if e.op == Op.INVERT:
            return self.value(f"xor {t} {x}, -1")
        if e.type.is_float:
            return self.value(f"fneg float {x}")
        return self.value(f"sub {t} 0, {x}")

    def visit_Binary(self, e: ir.Binary) -> str:
        at = e.a.type
        t = TYPE[at]
        a, b = self.expr(e.a), self.expr(e.b)
        if at.is_float:
            if e.op not in _FLOAT_OPS:
                raise KernelTypeError(f"cpu-native: float operator {e.op!r}")
            return self.value(f"{_FLOAT_OPS[e.op]} float {a}, {b}")
        if e.op in (Op.DIV, Op.MOD) and not self.in_function:
            if not (isinstance(e.b, ir.Const) and e.b.value not in (0, -1)):
                raise KernelTypeError(
                    f"cpu-native: integer {e.op} by a non-constant divisor reached the "
                    "renderer; it must go through floordiv/truncdiv (would trap)")
        if e.op in (Op.SHL, Op.SHR):  # the count wraps, as on Wasm and x86
            b = self.value(f"and {t} {b}, {_BITS[t] - 1}")
        if e.op in _INT_OPS:
            return self.value(f"{_INT_OPS[e.op]} {t} {a}, {b}")
        signed, unsigned = _SIGNED_OPS[e.op]
        return self.value(f"{unsigned if at in _UNSIGNED else signed} {t} {a}, {b}")

    def visit_Select(self, e: ir.Select) -> str:
        c, a, b = self.expr(e.cond), self.expr(e.a), self.expr(e.b)
        return self.value(f"select i1 {c}, {TYPE[e.type]} {a}, {TYPE[e.type]} {b}")

    def visit_Cast(self, e: ir.Cast) -> str:
        return self.cast(self.expr(e.x), e.x.type, e.type)

    def cast(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        s, d = TYPE[src], TYPE[dst]
        if dst == T.bool:
            if src.is_float:
                return self.value(f"fcmp une float {x}, 0.0")
            return x if src == T.bool else self.value(f"icmp ne {s} {x}, 0")
        if s == d:
            return x
        if dst.is_float:
            op = "uitofp" if src in _UNSIGNED else "sitofp"
            return self.value(f"{op} {s} {x} to float")
        if src.is_float:
            if d == "i64":
                sat = "fptoui.sat" if dst == T.u64 else "fptosi.sat"
                return self.intrinsic(sat, "i64", [("float", x)])
            if dst == T.u32:  # wraps like numpy for values in int64 range
                wide = self.intrinsic("fptosi.sat", "i64", [("float", x)])
                return self.value(f"trunc i64 {wide} to i32")
            return self.intrinsic("fptosi.sat", "i32", [("float", x)])
        return self.convert(x, s, src not in _UNSIGNED, d)

    def visit_Bitcast(self, e: ir.Bitcast) -> str:
        x = self.expr(e.x)
        s, d = TYPE[e.x.type], TYPE[e.type]
        return x if s == d else self.value(f"bitcast {s} {x} to {d}")

    def visit_Call(self, e: ir.Call) -> str:
        t = e.args[0].type
        args = [self.expr(a) for a in e.args]
        lt = TYPE[t]
        if self.traits.is_native(e.fn, t):
            if e.fn == "fmod":  # C's fmodf (exact), which the engine links from libm
                return self.value(f"frem float {args[0]}, {args[1]}")
            if e.fn in ("isnan", "isinf", "isfinite"):
                if e.fn == "isnan":
                    return self.value(f"fcmp uno float {args[0]}, {args[0]}")
                size = self.intrinsic("fabs", "float", [("float", args[0])])
                test = "oeq" if e.fn == "isinf" else "olt"
                return self.value(f"fcmp {test} float {size}, 0x7FF0000000000000")
            name = (FLOAT_INTRINSICS[e.fn] if t.is_float
                    else _INT_MINMAX[(e.fn, t not in _UNSIGNED)])
            return self.intrinsic(name, lt, [(lt, a) for a in args])
        typed = ", ".join(f"{TYPE[a.type]} {v}" for a, v in zip(e.args, args))
        return self.value(f"call {TYPE[e.type]} @{function_name(e.fn, t)}({typed})")
