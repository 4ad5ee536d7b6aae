"""Rewrites a kernel for a target without f16 arithmetic: f16 computes as f32.

Every f16 expression becomes f32; a cast to f16 becomes the ``round_f16`` polyfill (the
nearest float16 value), and f16 constants take their float16 value. Values an f16 kernel
returns are rounded too. Loads need nothing: float16 tensors are stored as exact f32 values.
"""

from __future__ import annotations

import numpy as np

from spawnml.kernel import ir
from spawnml.kernel.types import ScalarType

F16, F32 = ScalarType.f16, ScalarType.f32


def _t(t: ScalarType) -> ScalarType:
    return F32 if t == F16 else t


def lower_expr(e: ir.Expr) -> ir.Expr:
    t = _t(e.type)
    if isinstance(e, ir.Const):
        return ir.Const(t, float(np.float16(e.value)) if e.type == F16 else e.value)
    if isinstance(e, ir.Var):
        return ir.Var(t, e.name)
    if isinstance(e, ir.GlobalIndex):
        return e
    if isinstance(e, ir.Load):
        return ir.Load(t, e.buffer, lower_expr(e.index))
    if isinstance(e, ir.Unary):
        return ir.Unary(t, e.op, lower_expr(e.x))
    if isinstance(e, ir.Binary):
        return ir.Binary(t, e.op, lower_expr(e.a), lower_expr(e.b))
    if isinstance(e, ir.Select):
        return ir.Select(t, lower_expr(e.cond), lower_expr(e.a), lower_expr(e.b))
    if isinstance(e, ir.Bitcast):
        return ir.Bitcast(t, lower_expr(e.x))
    if isinstance(e, ir.Call):
        return ir.Call(t, e.fn, tuple(lower_expr(a) for a in e.args))
    if isinstance(e, ir.Cast):
        x = lower_expr(e.x)
        if e.type == F16:
            return ir.Call(F32, "round_f16", (x if x.type == F32 else ir.Cast(F32, x),))
        return x if x.type == t else ir.Cast(t, x)
    raise NotImplementedError(type(e).__name__)


def lower_stmts(body: tuple[ir.Stmt, ...], round_returns: bool = False) -> tuple[ir.Stmt, ...]:
    """Lowered statements; ``round_returns``: the values returned are rounded to f16."""
    r = round_returns
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Assign):
            out.append(ir.Assign(s.line, ir.Var(_t(s.var.type), s.var.name), lower_expr(s.value)))
        elif isinstance(s, ir.If):
            out.append(
                ir.If(s.line, lower_expr(s.cond), lower_stmts(s.then, r), lower_stmts(s.orelse, r))
            )
        elif isinstance(s, ir.For):
            out.append(
                ir.For(
                    s.line,
                    ir.Var(_t(s.var.type), s.var.name),
                    lower_expr(s.start),
                    lower_expr(s.stop),
                    s.step,
                    lower_stmts(s.body, r),
                )
            )
        elif isinstance(s, ir.Return):
            value = lower_expr(s.value)
            if r and not (isinstance(value, ir.Call) and value.fn == "round_f16"):
                value = ir.Call(F32, "round_f16", (value,))
            out.append(ir.Return(s.line, value))
        else:
            raise NotImplementedError(type(s).__name__)
    return tuple(out)


def lower_f16(k: ir.KernelIR) -> ir.KernelIR:
    """``k`` with f16 computed as f32 and f16 outputs rounded (the BufferSpecs are kept)."""
    body = lower_stmts(k.body, round_returns=k.output.type == F16)
    return ir.KernelIR(
        k.name,
        k.inputs,
        k.output,
        tuple(ir.Var(_t(v.type), v.name) for v in k.locals),
        body,
        k.source,
        k.key,
    )
