"""Unrolling short innermost loops with compile-time bounds.

A 3x3 window's ``kx`` loop runs three iterations of a few statements: its loop control (a
compare, a branch, an increment) costs as much as its work, and its variable keeps every
address computation symbolic. :func:`unroll_short_loops` replaces such a loop by its
iterations, each ``var = value`` followed by the body, when the result stays small; the
target's compiler then folds the constant offsets. IR to IR, so valid on every target (on
WebGL it also removes loops the driver's iteration limiter would count).
"""

from __future__ import annotations

import dataclasses

from . import ir
from .analysis import trip_count

MAX_TRIPS = 4
MAX_STATEMENTS = 256  # statements of the unrolled loop


def _size(body: tuple[ir.Stmt, ...]) -> int:
    return sum(1 for _ in ir.walk_stmts(body))


def _unroll(body: tuple[ir.Stmt, ...]) -> tuple[tuple[ir.Stmt, ...], bool]:
    out: list[ir.Stmt] = []
    changed = False
    for s in body:
        if isinstance(s, ir.For):
            inner, changed_inner = _unroll(s.body)
            changed |= changed_inner
            s = dataclasses.replace(s, body=inner) if changed_inner else s
            innermost = not any(isinstance(x, ir.For) for x in ir.walk_stmts(s.body))
            if innermost and isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const):
                start = int(s.start.value)
                trips = trip_count(start, int(s.stop.value), s.step)
                if trips <= MAX_TRIPS and trips * (1 + _size(s.body)) <= MAX_STATEMENTS:
                    for i in range(trips):
                        value = ir.Const(s.var.type, start + i * s.step)
                        out.append(ir.Assign(s.line, s.var, value))
                        out.extend(s.body)
                    changed = True
                    continue
        elif isinstance(s, ir.If):
            then, c1 = _unroll(s.then)
            orelse, c2 = _unroll(s.orelse)
            if c1 or c2:
                s = dataclasses.replace(s, then=then, orelse=orelse)
                changed = True
        out.append(s)
    return tuple(out), changed


def unroll_short_loops(k: ir.KernelIR) -> ir.KernelIR:
    """``k`` with its innermost loops of at most ``MAX_TRIPS`` compile-time iterations
    unrolled where the unrolled body stays under ``MAX_STATEMENTS`` statements."""
    body, changed = _unroll(k.body)
    return dataclasses.replace(k, body=body) if changed else k
