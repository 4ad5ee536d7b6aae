"""What every C-like target shares: expressions with precedence, statements, literals,
casts, intrinsic tables and the kernel skeleton.

A target is a subclass that sets type names, spellings and buffer declarations (see the
OpenCL, CUDA, WGSL and GLSL renderers in the backend packages). Behaviour is mostly data.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..dtypes import DType
from . import ir
from .polyfills import function_name
from .render import Renderer
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


class CStyleRenderer(Renderer):
    """Renders KernelIR as C-family source. Subclasses override the class attributes and a
    few hooks (``kernel_header``, ``load``, ``store``, literal and cast spellings)."""

    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: "bool", ScalarType.i32: "int", ScalarType.u32: "unsigned int",
        ScalarType.i64: "long long", ScalarType.f16: "half", ScalarType.f32: "float",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        DType.float32: "float", DType.float16: "half", DType.int32: "int",
        DType.uint32: "unsigned int", DType.int64: "long long", DType.bool: "unsigned char",
        DType.int8: "signed char", DType.uint8: "unsigned char", DType.int16: "short",
        DType.uint16: "unsigned short",
    }
    intrinsics: ClassVar[dict[str, str]] = {
        "exp": "exp({0})", "exp2": "exp2({0})", "log": "log({0})", "log2": "log2({0})",
        "sqrt": "sqrt({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
        "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})",
        "cosh": "cosh({0})", "tanh": "tanh({0})", "asinh": "asinh({0})",
        "acosh": "acosh({0})", "atanh": "atanh({0})", "floor": "floor({0})",
        "ceil": "ceil({0})", "trunc": "trunc({0})", "pow": "pow({0}, {1})",
        "atan2": "atan2({0}, {1})",
    }
    """Templates of native intrinsics, for every type the intrinsic accepts."""
    typed_intrinsics: ClassVar[dict[tuple[str, str], str]] = {}
    """Templates for one type kind only: (name, "float" | "int" | "signed" | "unsigned" | type)."""
    indent_unit: ClassVar[str] = "    "
    gid_name: ClassVar[str] = "gid"
    out_name: ClassVar[str] = "out"
    ternary: ClassVar[bool] = True  # False: select() function instead of ?:
    f16_arithmetic: bool = True
    """False: the target computes f16 as f32 and rounds with ``round_f16`` on every cast to
    f16 and on storing an f16 value into f32 storage (docs/kernels.md). Set per instance
    by renderers whose device decides it."""

    # ------------------------------------------------------------------ intrinsic support
    def is_native(self, fn: str, t: ScalarType) -> bool:
        return self.intrinsic_template(fn, t) is not None

    def intrinsic_template(self, fn: str, t: ScalarType) -> str | None:
        kinds = [t.value, "float" if t.is_float else "int",
                 "signed" if t.is_signed else "unsigned"]
        for kind in kinds:
            tpl = self.typed_intrinsics.get((fn, kind))
            if tpl is not None:
                return tpl
        return self.intrinsics.get(fn)

    # ------------------------------------------------------------------ names and types
    def type_name(self, t: ScalarType) -> str:
        if t == ScalarType.f16 and not self.f16_arithmetic:
            t = ScalarType.f32
        return self.type_names[t]

    def uses_f16(self, k: ir.KernelIR) -> bool:
        """Whether the kernel stores or computes f16 (targets add an extension or helpers)."""
        specs = (*k.inputs, k.output)
        return any(self.storage_dtype(b.dtype) is DType.float16 for b in specs) or any(
            e.type == ScalarType.f16 for e in ir.all_exprs(k.body)
        )

    def round_f16(self, x: str) -> str:  # pragma: no cover - per target, when f16 is emulated
        """``x`` (an f32 expression) rounded to the nearest f16 value, still as f32."""
        raise NotImplementedError(f"{self.name}: round_f16")

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
        if t == ScalarType.i64:
            return f"{v}LL" if v != -(2**63) else "(-9223372036854775807LL - 1)"
        return str(v) if v != -(2**31) else "(-2147483647 - 1)"

    def float_text(self, v: float, t: ScalarType) -> str:
        """Shortest decimal that round-trips at the type's precision."""
        text = str(np.float16(v) if t == ScalarType.f16 else np.float32(v))
        if "e" not in text and "." not in text:
            text += ".0"
        return text

    def float_literal(self, v: float, t: ScalarType) -> str:
        if t == ScalarType.f16 and not self.f16_arithmetic:
            return self.float_literal(float(np.float16(v)), ScalarType.f32)  # exact in f32
        if math.isnan(v):
            return self.special_float("nan", t)
        if math.isinf(v):
            return self.special_float("inf" if v > 0 else "-inf", t)
        text = self.float_text(v, t)
        return self.cast_text(text + "f", ScalarType.f32, t) if t != ScalarType.f32 else text + "f"

    def special_float(self, which: str, t: ScalarType) -> str:
        text = {"nan": "NAN", "inf": "INFINITY", "-inf": "(-INFINITY)"}[which]
        return text if t == ScalarType.f32 else self.cast_text(text, ScalarType.f32, t)

    # ------------------------------------------------------------------ conversions
    def cast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return f"(({self.type_name(dst)})({x}))"

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:  # pragma: no cover
        raise NotImplementedError(f"{self.name}: bitcast")

    def select_text(self, c: str, a: str, b: str, t: ScalarType) -> str:
        return f"({c} ? {a} : {b})"

    # ------------------------------------------------------------------ memory
    def load(self, k: ir.KernelIR, buffer: int, index: str, t: ScalarType) -> str:
        """Read element ``index`` of input ``buffer`` as compute type ``t``."""
        text = f"{self.input_name(k, buffer)}[{index}]"
        spec = k.inputs[buffer]
        return self.from_storage(text, self.storage_dtype(spec.dtype), t)

    def from_storage(self, text: str, storage: DType, t: ScalarType) -> str:
        if self.storage_names[storage] == self.type_name(t):
            return text
        if t == ScalarType.bool:
            return f"({text} != 0)"
        return f"(({self.type_name(t)})({text}))"

    def to_storage(self, value: str, t: ScalarType, storage: DType) -> str:
        if t == ScalarType.f16 and not self.f16_arithmetic and storage is DType.float32:
            return self.round_f16(value)
        if self.storage_names[storage] == self.type_name(t):
            return value
        return f"(({self.storage_names[storage]})({value}))"

    def store(self, k: ir.KernelIR, value: str, t: ScalarType) -> str:
        storage = self.storage_dtype(k.output.dtype)
        return f"{self.out_name}[{self.gid_name}] = {self.to_storage(value, t, storage)};"

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr) -> tuple[str, int]:
        """Source text and precedence of ``e``."""
        if isinstance(e, ir.Const):
            text = self.literal(e.value, e.type)
            return text, PREC_UNARY if text.startswith("-") else PREC_ATOM
        if isinstance(e, ir.Var):
            return self.var_name(e.name), PREC_ATOM
        if isinstance(e, ir.GlobalIndex):
            return self.gid_name, PREC_ATOM
        if isinstance(e, ir.Load):
            return self.load(self.kernel, e.buffer, self.text(e.index), e.type), PREC_ATOM
        if isinstance(e, ir.Unary):
            op = {"neg": "-", "not": "!", "invert": "~"}[e.op]
            x = self.wrap(e.x, PREC_UNARY, tight=True)
            return f"{op}{x}", PREC_UNARY
        if isinstance(e, ir.Binary):
            return self.binary(e)
        if isinstance(e, ir.Select):
            c, a, b = self.text(e.cond), self.text(e.a), self.text(e.b)
            text = self.select_text(c, a, b, e.type)
            return text, PREC_ATOM
        if isinstance(e, ir.Cast):
            text = self.cast_text(self.text(e.x), e.x.type, e.type)
            if e.type == ScalarType.f16 and not self.f16_arithmetic:
                text = self.round_f16(text)
            return text, PREC_ATOM
        if isinstance(e, ir.Bitcast):
            return self.bitcast_text(self.text(e.x), e.x.type, e.type), PREC_ATOM
        if isinstance(e, ir.Call):
            return self.call(e), PREC_ATOM
        raise NotImplementedError(type(e).__name__)

    def text(self, e: ir.Expr) -> str:
        return self.expr(e)[0]

    def wrap(self, e: ir.Expr, prec: int, tight: bool = False) -> str:
        text, p = self.expr(e)
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
        tpl = self.intrinsic_template(e.fn, t)
        if tpl is not None:
            return tpl.format(*args, t=self.type_name(t))
        return f"{function_name(e.fn, t)}({', '.join(args)})"

    # ------------------------------------------------------------------ statements
    def var_decl(self, v: ir.Var) -> str:
        return f"{self.type_name(v.type)} {self.var_name(v.name)} = {self.literal(0, v.type)};"

    def assign(self, var: ir.Var, value: str) -> str:
        return f"{self.var_name(var.name)} = {value};"

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
        lines: list[str] = []
        for s in stmts:
            if isinstance(s, ir.Assign):
                lines.append(pad + self.assign(s.var, self.text(s.value)))
            elif isinstance(s, ir.Return):
                value = self.text(s.value)
                lines += [pad + x for x in self.return_stmt(value, s.value.type, in_function)]
            elif isinstance(s, ir.If):
                lines.append(pad + self.if_header(self.text(s.cond)))
                lines += self.block(s.then, depth + 1, in_function)
                if s.orelse:
                    lines.append(pad + "} else {")
                    lines += self.block(s.orelse, depth + 1, in_function)
                lines.append(pad + "}")
            elif isinstance(s, ir.For):
                lines.append(pad + self.for_header(s))
                lines += self.block(s.body, depth + 1, in_function)
                lines.append(pad + "}")
            else:
                raise NotImplementedError(type(s).__name__)
        return lines

    # ------------------------------------------------------------------ skeleton
    prelude: ClassVar[str] = ""

    def function_header(self, f: ir.Function) -> str:
        params = ", ".join(f"{self.type_name(p.type)} {self.var_name(p.name)}" for p in f.params)
        return f"{self.type_name(f.ret)} {f.name}({params}) {{"

    def function_epilogue(self, f: ir.Function) -> list[str]:
        return []

    def kernel_header(self, k: ir.KernelIR) -> list[str]:  # pragma: no cover - per target
        raise NotImplementedError

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        """Lines computing ``gid`` and returning when it is past the output's end."""
        raise NotImplementedError  # pragma: no cover - per target

    def render_function(self, f: ir.Function) -> str:
        self.kernel = None  # type: ignore[assignment]
        lines = [self.function_header(f)]
        lines += [self.indent_unit + self.var_decl(v) for v in f.locals]
        lines += self.block(f.body, 1, in_function=True)
        lines += self.function_epilogue(f)
        lines.append("}")
        return "\n".join(lines)

    def render(self, k: ir.KernelIR) -> str:
        """The complete source of one specialised kernel."""
        functions = [self.render_function(f) for f in self.functions(k)]
        self.kernel = k
        lines = [f"// {k.name} from {k.source} [{k.key}]"]
        if self.prelude:
            lines.append(self.prelude.strip("\n"))
        lines += functions
        lines += self.kernel_header(k)
        lines += [self.indent_unit + x for x in self.kernel_prologue(k)]
        lines += [self.indent_unit + self.var_decl(v) for v in k.locals]
        lines += self.block(k.body, 1, in_function=False)
        lines.append("}")
        return "\n".join(lines) + "\n"
