"""Specialisation of expressions: Python AST expressions -> typed IR or compile-time values."""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from ..dtypes import DType
from ..errors import KernelSyntaxError
from . import ir
from .frontend import Helper
from .intrinsics import INTRINSICS
from .spec_support import (
    _CMP,
    _IR_BINOP,
    _MATH,
    _MATH_ALIASES,
    _OP_SYMBOL,
    _PY_BINOP,
    _PY_CMP,
    _PY_FOLD,
    _describe,
    _Flat,
    _is_const,
    _simplify,
    _TensorRef,
)
from .types import ScalarType, compute_type, scalar_type_of


class ExpressionSpecializer:
    """Mixin of :class:`Specializer`: everything that evaluates an expression."""

    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.err(
                node,
                f"'{type(node).__name__}' is not part of the kernel language",
                KernelSyntaxError,
            )
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.expr(e) for e in node.elts)

    def expr_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def load_name(self, name: str, node: ast.AST) -> Any:
        if name in self.scope.env:
            return self.scope.env[name]
        found, value = self.src.lookup_global(name)
        if not found:
            raise self.err(node, f"name {name!r} is not defined", KernelSyntaxError)
        if name == "math" or value is math:
            return _MATH
        if isinstance(value, ScalarType | Helper) or _is_const(value):
            return value
        if isinstance(value, DType):
            t = compute_type(value)
            if t is None:
                raise self.err(node, f"{value} is not a kernel type")
            return t
        if isinstance(value, tuple) and all(_is_const(v) for v in value):
            return value
        if value in (min, max, abs, float, int, bool, len):
            return value
        raise self.err(
            node,
            f"name {name!r} refers to {_describe(value)}, which kernels cannot "
            "use (allowed: numbers, bools, tuples of them, types, @helper functions)",
            KernelSyntaxError,
        )

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if base is _MATH:
            consts = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}
            if attr in consts:
                return consts[attr]
            raise self.err(node, f"math.{attr} must be called", KernelSyntaxError)
        if isinstance(base, _TensorRef):
            spec = base.spec
            if attr == "shape":
                return spec.shape
            if attr == "ndim":
                return len(spec.shape)
            if attr == "size":
                return spec.size
            if attr == "strides":
                return base.strides
            if attr == "dtype":
                return spec.type
            if attr == "flat":
                if base.is_output:
                    return ir.GlobalIndex(ScalarType.i32)
                return _Flat(base)
            if attr == "index" and base.is_output:
                return tuple(self.output_index())
        raise self.err(node, f"{_describe(base)} has no attribute {attr!r}", KernelSyntaxError)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(node.slice, ast.Slice):
            if not isinstance(base, tuple):
                raise self.err(
                    node, f"slicing is only allowed on compile-time tuples, not {_describe(base)}"
                )
            parts = [
                None if p is None else self.expr(p)
                for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if not all(p is None or isinstance(p, int) for p in parts):
                raise self.err(node, "tuple slice bounds must be compile-time integers")
            return base[slice(*parts)]
        index = self.expr(node.slice)
        if isinstance(base, tuple):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.err(
                    node,
                    f"tuples can only be indexed with compile-time integers "
                    f"(found {_describe(index)}); iterate with static_range()",
                )
            if not -len(base) <= index < len(base):
                raise self.err(node, f"index {index} is out of range for a tuple of {len(base)}")
            return base[index]
        if isinstance(base, _Flat):
            return self.load(base.tensor, self.index_expr(index, node), node)
        if isinstance(base, _TensorRef):
            if base.is_output:
                raise self.err(
                    node, "the output cannot be read; use out.index / out.flat", KernelSyntaxError
                )
            idx = index if isinstance(index, tuple) else (index,)
            shape = base.spec.shape
            if len(idx) != len(shape):
                raise self.err(
                    node,
                    f"tensor {node.value.id if isinstance(node.value, ast.Name) else ''!s}"
                    f" has {len(shape)} dimensions {shape} but was indexed with "
                    f"{len(idx)}; use x.flat[i] for flat reads",
                )
            flat: Any = 0
            for i, s in zip(idx, base.strides):
                term = self.binop(ast.Mult(), self.index_expr(i, node), s, node)
                flat = self.binop(ast.Add(), flat, term, node)
            return self.load(base, self.index_expr(flat, node), node)
        raise self.err(node, f"{_describe(base)} cannot be indexed", KernelSyntaxError)

    def index_expr(self, v: Any, node: ast.AST) -> ir.Expr:
        if isinstance(v, bool) or (not isinstance(v, int) and not isinstance(v, ir.Expr)):
            raise self.err(node, f"tensor indices must be integers, found {_describe(v)}")
        e = self.materialize(v, node)
        if e.type == ScalarType.u32:
            e = ir.Cast(ScalarType.i32, e)
        if e.type != ScalarType.i32:
            raise self.err(node, f"tensor indices must be i32, found {e.type}; cast(i, i32)")
        return e

    def load(self, t: _TensorRef, index: ir.Expr, node: ast.AST) -> Any:
        if isinstance(index, ir.Const) and t.spec.size and not 0 <= index.value < t.spec.size:
            raise self.err(
                node,
                f"constant index {index.value} is out of bounds for tensor "
                f"{t.spec.name!r} of {t.spec.size} elements",
            )
        return ir.Load(t.spec.type, t.slot, index)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.expr(node.operand)
        op = node.op
        if _is_const(x):
            if isinstance(op, ast.Not):
                return not x
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[
                type(op)
            ](x)
        if not isinstance(x, ir.Expr):
            raise self.err(node, f"unary operator on {_describe(x)}")
        if isinstance(op, ast.UAdd):
            return x
        if isinstance(op, ast.Not):
            if x.type != ScalarType.bool:
                raise self.err(node, f"'not' needs a bool, found {x.type}; compare explicitly")
            return ir.Unary(ScalarType.bool, "not", x)
        if isinstance(op, ast.USub):
            if x.type == ScalarType.bool or (x.type.is_int and not x.type.is_signed):
                raise self.err(node, f"cannot negate a {x.type}")
            if isinstance(x, ir.Const):
                return ir.Const(x.type, -x.value)
            return ir.Unary(x.type, "neg", x)
        if x.type == ScalarType.bool:
            return ir.Unary(ScalarType.bool, "not", x)
        if not x.type.is_int:
            raise self.err(node, f"'~' needs an integer, found {x.type}")
        return ir.Unary(x.type, "invert", x)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        sym = _OP_SYMBOL.get(type(op), type(op).__name__)
        if _is_const(a) and _is_const(b):
            try:
                return _PY_BINOP[type(op)](a, b)
            except ZeroDivisionError:
                raise self.err(
                    node, f"compile-time division by zero in {a!r} {sym} {b!r}"
                ) from None
        if not (isinstance(a, ir.Expr) or _is_const(a)) or not (
            isinstance(b, ir.Expr) or _is_const(b)
        ):
            raise self.err(node, f"operator {sym} cannot combine {_describe(a)} and {_describe(b)}")
        if isinstance(op, ast.Pow):
            return self.power(a, b, node)
        ea, eb = self.unify(a, b, node, f"'{sym}'")
        t = ea.type
        if isinstance(op, ast.BitAnd | ast.BitOr | ast.BitXor) and t == ScalarType.bool:
            logic = {ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "ne"}[type(op)]
            return ir.Binary(ScalarType.bool, logic, ea, eb)
        if t == ScalarType.bool:
            raise self.err(node, f"arithmetic '{sym}' on bools; convert with cast(x, i32)")
        if isinstance(op, ast.Div):
            if not t.is_float:
                raise self.err(
                    node,
                    f"'/' on {t} values; use '//' for integer division or cast to a float type",
                )
            return ir.Binary(t, "div", ea, eb)
        if isinstance(op, ast.FloorDiv | ast.Mod):
            floor = isinstance(op, ast.FloorDiv)
            if t.is_float:
                if floor:
                    return ir.Call(t, "floor", (ir.Binary(t, "div", ea, eb),))
                return ir.Call(t, "pymod", (ea, eb))
            return self.binop_int("div" if floor else "mod", ea, eb)
        if isinstance(op, ast.LShift | ast.RShift | ast.BitAnd | ast.BitOr | ast.BitXor):
            if not t.is_int:
                raise self.err(node, f"bitwise '{sym}' needs integers, found {t}")
        name = _IR_BINOP[type(op)]
        return _simplify(ir.Binary(t, name, ea, eb))

    def binop_int(self, op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        """Python-semantics integer // or %; C ops when operands are provably safe."""
        t = a.type
        if isinstance(b, ir.Const) and b.value == 1:
            return a if op == "div" else ir.Const(t, 0)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and b.value != 0:
            v = a.value // b.value if op == "div" else a.value % b.value
            return ir.Const(t, v)
        safe = isinstance(b, ir.Const) and b.value > 0 and self.is_nonneg(a)
        if safe:
            return ir.Binary(t, op, a, b)
        return ir.Call(t, "floordiv" if op == "div" else "floormod", (a, b))

    def power(self, a: Any, b: Any, node: ast.AST) -> Any:
        if (
            isinstance(b, int)
            and not isinstance(b, bool)
            and 0 <= b <= 4
            and isinstance(a, ir.Expr)
        ):
            if a.type == ScalarType.bool:
                raise self.err(node, "'**' on a bool")
            if b == 0:
                return ir.Const(a.type, 1.0 if a.type.is_float else 1)
            x = self.temp("pow", a, self.src.line(node)) if b > 1 else a
            result: ir.Expr = x
            for _ in range(b - 1):
                result = ir.Binary(a.type, "mul", result, x)
            return result
        ea, eb = self.unify(a, b, node, "'**'")
        if not ea.type.is_float:
            raise self.err(
                node,
                f"'**' on {ea.type} needs a compile-time exponent 0..4; "
                "use floats for general powers",
            )
        return ir.Call(ea.type, "pow", (ea, eb))

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for value_node in node.values:
            v = self.expr(value_node)
            if _is_const(v):
                if not isinstance(v, bool):
                    raise self.err(value_node, f"'and'/'or' need bools, found {v!r}")
                if v is (not is_and):  # short-circuit at compile time
                    return v
                continue
            if not isinstance(v, ir.Expr) or v.type != ScalarType.bool:
                raise self.err(
                    value_node,
                    f"'and'/'or' need bools, found {_describe(v)}; compare explicitly (x != 0)",
                )
            result = (
                v
                if result is None
                else ir.Binary(ScalarType.bool, "and" if is_and else "or", result, v)
            )
        return is_and if result is None else result

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        result: Any = True
        for op, comp_node in zip(node.ops, node.comparators):
            right = self.expr(comp_node)
            name = _CMP[type(op)]
            if _is_const(left) and _is_const(right):
                part: Any = _PY_CMP[name](left, right)
            else:
                a, b = self.unify(left, right, node, f"'{name}'")
                part = ir.Binary(ScalarType.bool, name, a, b)
            if part is False:
                return False
            if part is not True:
                result = part if result is True else ir.Binary(ScalarType.bool, "and", result, part)
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if _is_const(cond):
            return self.expr(node.body if cond else node.orelse)
        if not isinstance(cond, ir.Expr) or cond.type != ScalarType.bool:
            raise self.err(
                node.test,
                f"a conditional expression needs a bool condition, found {_describe(cond)}",
            )
        a, b = self.unify(self.expr(node.body), self.expr(node.orelse), node, "'if/else'")
        return ir.Select(a.type, cond, a, b)

    def expr_Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute):
            name = _MATH_ALIASES.get(func.attr, func.attr)
            return self.intrinsic(name, [self.expr(a) for a in node.args], node)
        assert isinstance(func, ast.Name)
        name = func.id
        target = self.scope.env.get(name)
        if target is None:
            found, value = self.src.lookup_global(name)
            target = value if found else None
        if isinstance(target, Helper):
            return self.call_helper(target, [self.expr(a) for a in node.args], node)
        if name in ("float", "int", "bool") and len(node.args) == 1:
            arg_node = node.args[0]
            if (
                name == "float"
                and isinstance(arg_node, ast.Constant)
                and isinstance(arg_node.value, str)
            ):
                text = arg_node.value.strip().lower()
                if text in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
                    return float(text)
                raise self.err(node, f"float({arg_node.value!r}): only 'nan', 'inf' and '-inf'")
            v = self.expr(arg_node)
            t = {"float": ScalarType.f32, "int": ScalarType.i32, "bool": ScalarType.bool}[name]
            if _is_const(v):
                return {"float": float, "int": int, "bool": bool}[name](v)
            return self.cast(v, t, node)
        args = [self.expr(a) for a in node.args]
        if name == "len":
            if len(args) != 1 or not isinstance(args[0], tuple):
                raise self.err(node, "len() takes one compile-time tuple")
            return len(args[0])
        if name == "cast_like":
            if len(args) != 2 or not isinstance(args[1], ir.Expr):
                raise self.err(
                    node,
                    "cast_like(value, like) takes a value and a runtime value "
                    "whose type to convert to",
                )
            return self.cast(args[0], args[1].type, node)
        if name in ("_rawdiv", "_rawmod") and self.src.fn.__module__ == "spawnml.kernel.polyfills":
            a, b = self.unify(args[0], args[1], node, name)
            return ir.Binary(a.type, name[4:], a, b)
        if name in ("cast", "bitcast"):
            if len(args) != 2:
                raise self.err(node, f"{name}(value, type) takes 2 arguments")
            t = scalar_type_of(args[1]) if not isinstance(args[1], ir.Expr | tuple) else None
            if t is None:
                raise self.err(
                    node,
                    f"{name}: {_describe(args[1])} is not a type (f32, f16, bf16, i32, "
                    "u32, i64, u64, boolean or x.dtype)",
                )
            return self.cast(args[0], t, node) if name == "cast" else self.bitcast(args[0], t, node)
        return self.intrinsic(name, args, node)

    def cast(self, v: Any, t: ScalarType, node: ast.AST) -> ir.Expr:
        if _is_const(v):
            if t == ScalarType.bool:
                return ir.Const(t, bool(v))
            if t.is_float:
                return ir.Const(t, float(v))
            if isinstance(v, float) and not math.isfinite(v):
                raise self.err(node, f"cannot convert {v} to {t}")
            return self.materialize(int(v), node, t)
        e = self.materialize(v, node)
        if e.type == t:
            return e
        if t == ScalarType.bool:
            return ir.Binary(
                ScalarType.bool, "ne", e, ir.Const(e.type, 0.0 if e.type.is_float else 0)
            )
        return ir.Cast(t, e)

    def bitcast(self, v: Any, t: ScalarType, node: ast.AST) -> ir.Expr:
        e = self.materialize(v, node)
        ok = (ScalarType.f32, ScalarType.i32, ScalarType.u32)
        if e.type not in ok or t not in ok:
            raise self.err(
                node, f"bitcast converts between f32, i32 and u32; found {e.type} -> {t}"
            )
        return e if e.type == t else ir.Bitcast(t, e)

    def intrinsic(self, name: str, args: list[Any], node: ast.AST) -> Any:
        if name in ("min", "max") and len(args) > 2:
            result = args[0]
            for a in args[1:]:
                result = self.intrinsic(name, [result, a], node)
            return result
        spec = INTRINSICS.get(name)
        if spec is None:
            raise self.err(
                node,
                f"{name!r} is not an intrinsic or @helper; intrinsics: "
                f"{', '.join(sorted(INTRINSICS))}",
                KernelSyntaxError,
            )
        if len(args) != spec.arity:
            raise self.err(node, f"{name}() takes {spec.arity} argument(s), got {len(args)}")
        if all(_is_const(a) for a in args) and name in _PY_FOLD:
            return _PY_FOLD[name](*args)
        if any(not (isinstance(a, ir.Expr) or _is_const(a)) for a in args):
            raise self.err(
                node,
                f"{name}() takes scalar values, found " + ", ".join(_describe(a) for a in args),
            )
        typed = [a.type for a in args if isinstance(a, ir.Expr)]
        if typed:
            t = typed[0]
            for other in typed[1:]:
                if other != t:
                    raise self.err(
                        node,
                        f"{name}() arguments have types {t} and {other}; "
                        "convert explicitly with cast()",
                    )
        else:
            t = (
                ScalarType.f32
                if spec.accepts == "float" or any(isinstance(a, float) for a in args)
                else ScalarType.i32
            )
        exprs = tuple(self.materialize(a, node, t) for a in args)
        if not spec.accepts_type(t):
            raise self.err(node, f"{name}() needs {spec.accepts} arguments, found {t}")
        return ir.Call(spec.result_type(t), name, exprs)
