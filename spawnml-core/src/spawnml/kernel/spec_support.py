"""Compile-time values, name scopes and operator tables used by specialisation."""

from __future__ import annotations

import ast
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DType, dtype as as_dtype
from ..errors import InvalidInputError
from . import ir
from .frontend import _body_without_docstring, _Source  # noqa: F401  (re-exported)
from .types import ScalarType

_MAX_UNROLL = 4096
_I32 = (-(2**31), 2**31 - 1)


class _Promote(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


@dataclass(frozen=True)
class _TensorRef:
    slot: int
    spec: ir.BufferSpec
    is_output: bool = False

    @property
    def strides(self) -> tuple[int, ...]:
        strides, acc = [], 1
        for d in reversed(self.spec.shape):
            strides.append(acc)
            acc *= d
        return tuple(reversed(strides))


@dataclass(frozen=True)
class _Flat:
    tensor: _TensorRef


class _MathModule:
    pass


_MATH = _MathModule()
_PY_SCALAR = (bool, int, float)
_MATH_ALIASES = {"fabs": "abs"}


def _is_const(v: Any) -> bool:
    return isinstance(v, _PY_SCALAR) and not isinstance(v, np.generic)


def _spec_of(name: str, value: Any) -> tuple[tuple[int, ...], DType]:
    if isinstance(value, tuple) and len(value) == 2 and not hasattr(value, "shape"):
        shape, dt = value
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        shape, dt = value.shape, value.dtype
    else:
        raise InvalidInputError(f"{name}: expected (shape, dtype) or an array-like; got {value!r}")
    return tuple(int(d) for d in shape), as_dtype(dt)


class _Scope:
    """Name bindings of one kernel or one inlined helper call."""

    def __init__(self, src: _Source, prefix: str) -> None:
        self.src = src
        self.prefix = prefix
        self.env: dict[str, Any] = {}

    def key(self, name: str) -> str:
        return self.prefix + name


# ---------------------------------------------------------------------------- tables


_OP_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_PY_BINOP = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_IR_BINOP = {
    ast.Add: ir.Op.ADD,
    ast.Sub: ir.Op.SUB,
    ast.Mult: ir.Op.MUL,
    ast.LShift: ir.Op.SHL,
    ast.RShift: ir.Op.SHR,
    ast.BitAnd: ir.Op.BITAND,
    ast.BitOr: ir.Op.BITOR,
    ast.BitXor: ir.Op.BITXOR,
}
_CMP = {
    ast.Lt: ir.Op.LT, ast.LtE: ir.Op.LE, ast.Gt: ir.Op.GT, ast.GtE: ir.Op.GE, ast.Eq: ir.Op.EQ,
    ast.NotEq: ir.Op.NE,
}
_PY_CMP = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}
_PY_FOLD = {"min": min, "max": max, "abs": abs}


def _simplify(e: ir.Binary) -> ir.Expr:
    """Fold the identities index arithmetic produces once shapes are constants."""
    a, b, op = e.a, e.b, e.op
    ca = a.value if isinstance(a, ir.Const) else None
    cb = b.value if isinstance(b, ir.Const) else None
    if ca is not None and cb is not None and e.type.is_int and op in ("add", "sub", "mul"):
        v = {"add": ca + cb, "sub": ca - cb, "mul": ca * cb}[op]
        if _I32[0] <= v <= _I32[1] or e.type != ScalarType.i32:
            return ir.Const(e.type, v)
    if op == "add":
        if cb == 0 and e.type.is_int:
            return a
        if ca == 0 and e.type.is_int:
            return b
    if op == "sub" and cb == 0 and e.type.is_int:
        return a
    if op == "mul" and e.type.is_int:
        if cb == 1:
            return a
        if ca == 1:
            return b
        if cb == 0 or ca == 0:
            return ir.Const(e.type, 0)
    return e


def _describe(v: Any) -> str:
    if isinstance(v, ir.Expr):
        return f"a runtime {v.type} value"
    if isinstance(v, _TensorRef):
        return "the output" if v.is_output else f"tensor {v.spec.name!r}"
    if isinstance(v, _Flat):
        return f"{v.tensor.spec.name}.flat"
    if isinstance(v, tuple):
        return f"the tuple {v!r}"
    if isinstance(v, ScalarType):
        return f"the type {v}"
    if _is_const(v):
        return f"the constant {v!r}"
    return f"a {type(v).__name__}"


def _always_returns(stmts: Sequence[ir.Stmt]) -> bool:
    for s in stmts:
        if isinstance(s, ir.Return):
            return True
        if isinstance(s, ir.If) and _always_returns(s.then) and _always_returns(s.orelse):
            return True
    return False
