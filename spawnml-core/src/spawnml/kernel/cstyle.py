"""What every C-like target shares: expressions with precedence, statements, literals,
casts, the pointer buffer model and the kernel skeleton.

A target is a subclass that sets type names, spellings and buffer declarations, and a
:class:`~spawnml.kernel.traits.TargetTraits` value (see the OpenCL, CUDA, WGSL and GLSL
renderers in the backend packages). Behaviour is mostly data; target quirks are rewrites
(``spawnml.kernel.passes``) that run before printing.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..dtypes import DType
from ..errors import KernelCompileError
from . import ir
from .analysis import calls, uses_type
from .polyfills import function_name
from .render import Renderer
from .traits import TargetTraits, table
from .types import ScalarType

# C precedence (higher binds tighter).
PREC_ATOM, PREC_UNARY, PREC_MUL, PREC_ADD, PREC_SHIFT = 100, 90, 80, 70, 60
PREC_REL, PREC_EQ, PREC_BITAND, PREC_BITXOR, PREC_BITOR = 50, 45, 40, 35, 30
PREC_AND, PREC_OR, PREC_TERNARY = 20, 15, 10

BINARY: dict[str, tuple[str, int]] = {
    "add": ("+", PREC_ADD), "sub": ("-", PREC_ADD), "mul": ("*", PREC_MUL),
    "div": ("/", PREC_MUL), "mod": ("%", PREC_MUL), "shl": ("<<", PREC_SHIFT),
    "shr": (">>", PREC_SHIFT), "lt": ("<", PREC_REL), "le": ("<=", PREC_REL),
    "gt": (">", PREC_REL), "ge": (">=", PREC_REL), "eq": ("==", PREC_EQ),
    "ne": ("!=", PREC_EQ), "bitand": ("&", PREC_BITAND), "bitxor": ("^", PREC_BITXOR),
    "bitor": ("|", PREC_BITOR), "and": ("&&", PREC_AND), "or": ("||", PREC_OR),
}
UNARY = {"neg": "-", "not": "!", "invert": "~"}

LIBM: dict[tuple[str, str], str] = table({
    "exp": "exp({0})", "exp2": "exp2({0})", "log": "log({0})", "log2": "log2({0})",
    "sqrt": "sqrt({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
    "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})",
    "cosh": "cosh({0})", "tanh": "tanh({0})", "asinh": "asinh({0})",
    "acosh": "acosh({0})", "atanh": "atanh({0})", "floor": "floor({0})",
    "ceil": "ceil({0})", "trunc": "trunc({0})", "pow": "pow({0}, {1})",
    "atan2": "atan2({0}, {1})",
})
"""The math every C-like target spells the C way, for every type the intrinsic accepts."""

GPU_C_MATH: dict[tuple[str, str], str] = {
    **LIBM,
    **table({"rsqrt": "rsqrt({0})", "erf": "erf({0})", "fmod": "fmod({0}, {1})",
             "round": "rint({0})"}),  # round() is half away from zero; rint is half to even
    ("abs", "float"): "fabs({0})", ("abs", "unsigned"): "{0}",
    ("min", "int"): "min({0}, {1})", ("max", "int"): "max({0}, {1})",
    **table({"isnan": "isnan({0})", "isinf": "isinf({0})", "isfinite": "isfinite({0})"},
            "float"),
    # float min/max (fmin/fmax drop NaN), sign, integer floordiv/floormod/truncdiv/truncmod
    # (0 and -1 divisors) and pymod come from the kernel-language polyfills.
}
"""What OpenCL C and CUDA C share on top of ``LIBM``."""


class CStyleRenderer(Renderer):
    """Prints lowered KernelIR as C-family source. Subclasses override the class attributes
    and a few hooks (``kernel_header``, ``load``, ``store``, literal and cast spellings)."""

    traits: TargetTraits = TargetTraits("c", intrinsics=LIBM)
    intrinsics: ClassVar[dict[str, str]] = {name: tpl for (name, _), tpl in LIBM.items()}
    """``LIBM`` by name, for subclasses written before ``traits`` (``{**intrinsics, ...}``)."""
    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: "bool", ScalarType.i32: "int", ScalarType.u32: "unsigned int",
        ScalarType.i64: "long long", ScalarType.u64: "unsigned long long",
        ScalarType.f16: "half", ScalarType.f32: "float",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        DType.float32: "float", DType.float16: "half", DType.int32: "int",
        DType.uint32: "unsigned int", DType.int64: "long long",
        DType.uint64: "unsigned long long", DType.bool: "unsigned char",
        DType.int8: "signed char", DType.uint8: "unsigned char", DType.int16: "short",
        DType.uint16: "unsigned short",
    }
    indent_unit: ClassVar[str] = "    "
    gid_name: ClassVar[str] = "gid"
    out_name: ClassVar[str] = "out"
    i64_suffix: ClassVar[str] = "LL"
    u64_suffix: ClassVar[str] = "ULL"
    i32_suffix: ClassVar[str] = ""
    i32_min: ClassVar[str] = "(-2147483647 - 1)"
    float_suffix: ClassVar[dict[ScalarType, str]] = {ScalarType.f32: "f"}
    """Literal suffixes; a float type without one is a cast of an f32 literal."""
    conversion: ClassVar[str] = "(({name})({x}))"  # a value conversion to type ``name``
    storage_zero: ClassVar[str] = "0"  # zero of a storage type ``name`` (bool loads)
    # the pointer buffer model: the kernel's arguments are the output and input pointers
    kernel_prefix: ClassVar[str] = "void"
    buffer_prefix: ClassVar[str] = ""
    restrict: ClassVar[str] = "restrict"
    function_prefix: ClassVar[str] = ""
    gid_expr: ClassVar[str] = "0"  # the invocation's flat index, as the target computes it
    # f16 stored in 16 bits but computed as f32 (``{ptr}``, ``{index}``, ``{value}``)
    half_load: ClassVar[str | None] = None
    half_store: ClassVar[str | None] = None
    f16_extension: ClassVar[str] = ""  # prelude enabling f16 arithmetic
    f16_helpers: ClassVar[str] = ""  # prelude defining the f16 emulation helpers
    # vectors (targets whose traits set ``vector_width``; see ``spawnml.kernel.vectorize``)
    vector_type: ClassVar[str] = "{t}{n}"
    vector_compose: ClassVar[str] = "({vt})({xs})"  # also a splat, with one value
    vector_load: ClassVar[str] = "vload{n}(0, {ptr} + {index})"
    vector_store: ClassVar[str] = "vstore{n}({value}, 0, {ptr} + {index});"
    lane_access: ClassVar[str] = "{v}.s{j:x}"
    _lanes: ClassVar[dict[str, str]] = {}  # lane variable -> its spelling (per kernel printed)

    # ------------------------------------------------------------------ names and types
    def type_name(self, t: ScalarType) -> str:
        return self.type_names[t]

    def uses_f16(self, k: ir.KernelIR) -> bool:
        """Whether the kernel stores, computes or rounds f16 (targets add an extension or
        helpers)."""
        specs = (*k.inputs, k.output)
        return (
            any(self.storage_dtype(b.dtype) is DType.float16 for b in specs)
            or uses_type(k, ScalarType.f16)
            or calls(k, "round_f16")
        )

    def var_name(self, name: str) -> str:
        """The target's spelling of an IR variable (override to avoid reserved identifiers)."""
        return name

    def input_name(self, k: ir.KernelIR, i: int) -> str:
        return f"in_{k.inputs[i].name}"

    def storage_name(self, dt: DType) -> str:
        return self.storage_names[self.storage_dtype(dt)]

    # ------------------------------------------------------------------ literals
    def literal(self, value: bool | int | float, t: ScalarType) -> str:
        if t == ScalarType.bool:
            return "true" if value else "false"
        if t.is_float:
            return self.float_literal(float(value), t)
        return self.int_literal(int(value), t)

    def int_literal(self, v: int, t: ScalarType) -> str:
        if t == ScalarType.u32:
            return f"{v}u"
        if t == ScalarType.u64:
            return f"{v}{self.u64_suffix}"
        if t == ScalarType.i64:
            s = self.i64_suffix
            return f"{v}{s}" if v != -(2**63) else f"(-9223372036854775807{s} - 1)"
        return f"{v}{self.i32_suffix}" if v != -(2**31) else self.i32_min

    def float_text(self, v: float, t: ScalarType) -> str:
        """Shortest decimal that round-trips at the type's precision, or the exact value
        where that decimal lies beyond the type's largest finite value (FLT_MAX's shortest,
        3.4028235e+38, is above it: WGSL's compilers refuse it as unrepresentable)."""
        typed = np.float16(v) if t == ScalarType.f16 else np.float32(v)
        text = str(typed)
        if abs(float(text)) > float(np.finfo(typed.dtype).max):
            text = repr(float(typed))
        if "e" not in text and "." not in text:
            text += ".0"
        return text

    def float_literal(self, v: float, t: ScalarType) -> str:
        if v != v or v in (float("inf"), float("-inf")):
            return self.special_float("nan" if v != v else ("inf" if v > 0 else "-inf"), t)
        text = self.float_text(v, t)
        if t in self.float_suffix:
            return text + self.float_suffix[t]
        return self.cast_text(text + self.float_suffix[ScalarType.f32], ScalarType.f32, t)

    def special_float(self, which: str, t: ScalarType) -> str:
        default = {"nan": "NAN", "inf": "INFINITY", "-inf": "(-INFINITY)"}[which]
        text = self.traits.special_floats.get(which, default)
        if self.type_name(t) == self.type_name(ScalarType.f32):
            return text
        return self.cast_text(text, ScalarType.f32, t)

    # ------------------------------------------------------------------ conversions
    def cast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return self.conversion.format(name=self.type_name(dst), x=x)

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        if self.type_name(src) == self.type_name(dst):
            return x
        spelling = self.traits.bitcasts.get((src, dst))
        if spelling is None:
            raise KernelCompileError(f"{self.traits.name}: no bitcast from {src} to {dst}")
        return spelling.format(x, dst=self.type_name(dst))

    select_template: ClassVar[str] = "({c} ? {a} : {b})"

    def select_text(self, c: str, a: str, b: str, t: ScalarType) -> str:
        return self.select_template.format(c=c, a=a, b=b)

    # ------------------------------------------------------------------ memory
    def half_storage(self, dt: DType) -> bool:
        """Whether ``dt`` is stored as 16-bit f16 but computed as f32."""
        return (self.half_load is not None and not self.f16_arithmetic
                and self.storage_dtype(dt) is DType.float16)

    def load(self, k: ir.KernelIR, buffer: int, index: str, t: ScalarType) -> str:
        """Read element ``index`` of input ``buffer`` as compute type ``t``."""
        if self.half_storage(k.inputs[buffer].dtype):
            return self.half_load.format(ptr=self.input_name(k, buffer), index=index)
        text = f"{self.input_name(k, buffer)}[{index}]"
        return self.from_storage(text, self.storage_dtype(k.inputs[buffer].dtype), t)

    def from_storage(self, text: str, storage: DType, t: ScalarType) -> str:
        name = self.storage_names[storage]
        if name == self.type_name(t):
            return text
        if t == ScalarType.bool:
            return f"({text} != {self.storage_zero.format(name=name)})"
        return self.conversion.format(name=self.type_name(t), x=text)

    def to_storage(self, value: str, t: ScalarType, storage: DType) -> str:
        name = self.storage_names[storage]
        return value if name == self.type_name(t) else self.conversion.format(name=name, x=value)

    def store(self, k: ir.KernelIR, value: str, t: ScalarType, index: str | None = None) -> str:
        """Write the output element ``index`` (the invocation's own, ``gid``, by default)."""
        index = self.gid_name if index is None else index
        if self.half_storage(k.output.dtype):
            return self.half_store.format(ptr=self.out_name, index=index, value=value)
        storage = self.storage_dtype(k.output.dtype)
        return f"{self.out_name}[{index}] = {self.to_storage(value, t, storage)};"

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr) -> tuple[str, int]:
        """Source text and precedence of ``e``."""
        return self.visit(e)

    def visit_Const(self, e: ir.Const) -> tuple[str, int]:
        text = self.literal(e.value, e.type)
        return text, PREC_UNARY if text.startswith("-") else PREC_ATOM

    def visit_Var(self, e: ir.Var) -> tuple[str, int]:
        lane = self._lanes.get(e.name)
        return (lane if lane is not None else self.var_name(e.name)), PREC_ATOM

    def visit_GlobalIndex(self, e: ir.GlobalIndex) -> tuple[str, int]:
        return self.gid_name, PREC_ATOM

    def visit_Load(self, e: ir.Load) -> tuple[str, int]:
        return self.load(self.kernel, e.buffer, self.text(e.index), e.type), PREC_ATOM

    def visit_Unary(self, e: ir.Unary) -> tuple[str, int]:
        return f"{UNARY[e.op]}{self.wrap(e.x, PREC_UNARY, tight=True)}", PREC_UNARY

    def visit_Binary(self, e: ir.Binary) -> tuple[str, int]:
        return self.binary(e)

    def visit_Select(self, e: ir.Select) -> tuple[str, int]:
        c, a, b = self.text(e.cond), self.text(e.a), self.text(e.b)
        return self.select_text(c, a, b, e.type), PREC_ATOM

    def visit_Cast(self, e: ir.Cast) -> tuple[str, int]:
        return self.cast_text(self.text(e.x), e.x.type, e.type), PREC_ATOM

    def visit_Bitcast(self, e: ir.Bitcast) -> tuple[str, int]:
        return self.bitcast_text(self.text(e.x), e.x.type, e.type), PREC_ATOM

    def visit_Call(self, e: ir.Call) -> tuple[str, int]:
        return self.call(e), PREC_ATOM

    def text(self, e: ir.Expr) -> str:
        return self.visit(e)[0]

    def wrap(self, e: ir.Expr, prec: int, tight: bool = False) -> str:
        text, p = self.visit(e)
        if p < prec or (tight and p == prec):
            return f"({text})"
        return text

    def binary(self, e: ir.Binary) -> tuple[str, int]:
        sym, prec = BINARY[e.op]
        left = self.wrap(e.a, prec)
        right = self.wrap(e.b, prec, tight=True)
        return f"{left} {sym} {right}", prec

    def call(self, e: ir.Call) -> str:
        t = e.args[0].type
        args = [self.text(a) for a in e.args]
        tpl = self.traits.native(e.fn, t)
        if tpl is not None:
            return tpl.format(*args, t=self.type_name(t))
        return f"{function_name(e.fn, t)}({', '.join(args)})"

    # ------------------------------------------------------------------ vectors
    def vector_type_name(self, e: ir.VecExpr | ir.VectorVar, n: int | None = None) -> str:
        return self.vector_type.format(t=self.type_name(e.type), n=n or e.lanes)  # type: ignore[union-attr]

    def compose(self, e: ir.VecExpr, parts: list[str]) -> str:
        return self.vector_compose.format(vt=self.vector_type_name(e), xs=", ".join(parts))

    def visit_VecRef(self, e: ir.VecRef) -> tuple[str, int]:
        return self.var_name(e.name), PREC_ATOM

    def visit_VecSplat(self, e: ir.VecSplat) -> tuple[str, int]:
        return self.compose(e, [self.text(e.x)]), PREC_ATOM

    def visit_VecLanes(self, e: ir.VecLanes) -> tuple[str, int]:
        return self.compose(e, [self.text(x) for x in e.xs]), PREC_ATOM

    def visit_VecLoad(self, e: ir.VecLoad) -> tuple[str, int]:
        ptr = self.input_name(self.kernel, e.buffer)
        text = self.vector_load.format(n=e.lanes, ptr=ptr, index=self.wrap(e.index, PREC_ADD),
                                       vt=self.vector_type_name(e))
        return text, PREC_ATOM

    def visit_VecBinary(self, e: ir.VecBinary) -> tuple[str, int]:
        return f"({self.text(e.a)} {BINARY[e.op][0]} {self.text(e.b)})", PREC_ATOM

    def visit_VecCall(self, e: ir.VecCall) -> tuple[str, int]:
        """The scalar spelling applied to vectors: C-style targets that list ``fn`` in
        ``vector_calls`` overload it for vectors (OpenCL's builtins)."""
        template = self.traits.native(e.fn, e.type)
        if template is None or "{t}" in template:
            raise KernelCompileError(f"{self.traits.name}: {e.fn} is listed in vector_calls "
                                     "but has no plain spelling to apply to vectors")
        return template.format(*(self.text(a) for a in e.args)), PREC_ATOM

    def visit_VecAssign(self, s: ir.VecAssign, in_function: bool) -> list[str]:
        return [f"{self.var_name(s.name)} = {self.text(s.value)};"]

    def visit_VecStore(self, s: ir.VecStore, in_function: bool) -> list[str]:
        return [self.vector_store.format(n=s.value.lanes, value=self.text(s.value),
                                         ptr=self.out_name, index=self.wrap(s.index, PREC_ADD))]

    def vector_decl(self, v: ir.VectorVar) -> str:
        zero = self.vector_compose.format(vt=self.vector_type_name(v, len(v.lane_names)),
                                          xs=self.literal(0, v.type))
        return f"{self.vector_type_name(v, len(v.lane_names))} {self.var_name(v.name)} = {zero};"

    # ------------------------------------------------------------------ statements
    def var_decl(self, v: ir.Var) -> str:
        return f"{self.type_name(v.type)} {self.var_name(v.name)} = {self.literal(0, v.type)};"

    def assign(self, var: ir.Var, value: str) -> str:
        lane = self._lanes.get(var.name)  # one lane of a vector variable
        return f"{lane if lane is not None else self.var_name(var.name)} = {value};"

    def for_header(self, s: ir.For) -> str:
        v = self.var_name(s.var.name)
        cmp = "<" if s.step > 0 else ">"
        step = f"{v} += {s.step}" if s.step > 0 else f"{v} -= {-s.step}"
        return f"for ({v} = {self.text(s.start)}; {v} {cmp} {self.text(s.stop)}; {step}) {{"

    def if_header(self, cond: str) -> str:
        return f"if ({cond}) {{"

    def return_stmt(self, value: str, t: ScalarType, in_function: bool) -> list[str]:
        if in_function:
            return [f"return {value};"]
        return [self.store(self.kernel, value, t), "return;"]

    def block(self, stmts: tuple[ir.Stmt, ...], depth: int, in_function: bool) -> list[str]:
        pad = self.indent_unit * depth
        return [pad + line for s in stmts for line in self.visit(s, in_function)]

    def visit_Assign(self, s: ir.Assign, in_function: bool) -> list[str]:
        return [self.assign(s.var, self.text(s.value))]

    def visit_Return(self, s: ir.Return, in_function: bool) -> list[str]:
        return self.return_stmt(self.text(s.value), s.value.type, in_function)

    def visit_Store(self, s: ir.Store, in_function: bool) -> list[str]:
        return [self.store(self.kernel, self.text(s.value), s.value.type, self.text(s.index))]

    def visit_If(self, s: ir.If, in_function: bool) -> list[str]:
        lines = [self.if_header(self.text(s.cond)), *self.block(s.then, 1, in_function)]
        if s.orelse:
            lines += ["} else {", *self.block(s.orelse, 1, in_function)]
        return [*lines, "}"]

    def visit_For(self, s: ir.For, in_function: bool) -> list[str]:
        return [self.for_header(s), *self.block(s.body, 1, in_function), "}"]

    # ------------------------------------------------------------------ skeleton
    def directives(self, k: ir.KernelIR) -> list[str]:
        """Lines before everything, the kernel's comment included (``#version``, ``enable``)."""
        return []

    def prelude(self, k: ir.KernelIR) -> list[str]:
        """Lines before the functions: the f16 extension or emulation helpers."""
        if not self.uses_f16(k):
            return []
        text = self.f16_extension if self.f16_arithmetic else self.f16_helpers
        return [text] if text else []

    def function_header(self, f: ir.Function) -> str:
        params = ", ".join(f"{self.type_name(p.type)} {self.var_name(p.name)}" for p in f.params)
        return f"{self.function_prefix}{self.type_name(f.ret)} {f.name}({params}) {{"

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        """The entry point taking the output and input pointers (the pointer buffer model)."""
        def param(dt: DType, const: str, name: str) -> str:
            return f"{self.buffer_prefix}{const}{self.storage_name(dt)} *{self.restrict} {name}"

        out = param(k.output.dtype, "", self.out_name)
        ins = [param(b.dtype, "const ", self.input_name(k, i)) for i, b in enumerate(k.inputs)]
        return [f"{self.kernel_prefix} {kernel_name(k)}({', '.join([out, *ins])}) {{"]

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        """Lines computing ``gid`` and returning when it is past the output's end."""
        # The unsigned bound tells the compiler 0 <= gid < size, so index math by constants
        # becomes shifts and masks (PoCL then vectorises it: 10x on a broadcast add).
        u32 = self.type_name(ScalarType.u32)
        return [f"int {self.gid_name} = (int){self.gid_expr};",
                f"if (({u32}){self.gid_name} >= {k.size}u) return;"]

    def render_function(self, f: ir.Function) -> str:
        self.kernel = None  # type: ignore[assignment]
        self._lanes = {}
        lines = [self.function_header(f)]
        lines += [self.indent_unit + self.var_decl(v) for v in f.locals]
        lines += self.block(f.body, 1, in_function=True)
        lines.append("}")
        return "\n".join(lines)

    def print_kernel(self, k: ir.KernelIR) -> str:
        functions = [self.render_function(f) for f in k.functions]
        self.kernel = k
        self._lanes = {
            lane: self.lane_access.format(v=self.var_name(v.name), j=j)
            for v in k.vectors for j, lane in enumerate(v.lane_names)
        }
        lines = [*self.directives(k), f"// {k.name} from {k.source} [{k.key}]"]
        lines += [*self.prelude(k), *functions]
        lines += self.kernel_header(k)
        lines += [self.indent_unit + x for x in self.kernel_prologue(k)]
        lines += [self.indent_unit + self.var_decl(v) for v in k.locals]
        lines += [self.indent_unit + self.vector_decl(v) for v in k.vectors]
        lines += self.block(k.body, 1, in_function=False)
        lines.append("}")
        return "\n".join(lines) + "\n"


def kernel_name(k: ir.KernelIR) -> str:
    """The entry point's name; prefixed so a kernel called ``exp`` cannot shadow a builtin."""
    return f"k_{k.name}"


def bitcasts(spelling: str) -> dict[tuple[ScalarType, ScalarType], str]:
    """One spelling (``{0}`` the value, ``{dst}`` the target type) for every 32-bit pair."""
    words = (ScalarType.f32, ScalarType.i32, ScalarType.u32)
    return {(a, b): spelling for a in words for b in words if a != b}
