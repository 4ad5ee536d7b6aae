"""Interior versions of loop nests: the bounds tests of padded windows hoisted out.

A padded convolution or pooling window tests every tap (``if 0 <= iy < H and 0 <= ix < W``),
yet almost every invocation lies inside, where each test holds on every iteration.
:func:`version_interior` finds, in each loop nest at the top of the kernel, the comparisons
guarding branches whose two sides are linear in the nest's loop variables once the
variables assigned in the nest are replaced by their (dominating, single) definitions. A
linear function over a box of loop ranges takes its extremes at the box's corners, so such
a comparison holds on every iteration exactly when it holds at every corner. The nest
becomes::

    if <every hoisted comparison at every corner>:
        <the nest with those comparisons replaced by true>
    else:
        <the nest as it was>

The range folding that follows drops the ``if true`` branches, so the interior version has
no per-tap tests: its loads are unconditional (vector loads on targets with vectors) and its
loop bodies are straight-line. Valid on every target: the rewrite is IR to IR.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

from . import ir
from .ir import Op
from .rewrite import map_children
from .types import ScalarType

I32 = ScalarType.i32
BOOL = ScalarType.bool
TRUE = ir.Const(BOOL, True)
_ORDER = (Op.LT, Op.LE, Op.GT, Op.GE)
MAX_CORNERS = 16  # loop variables in one comparison: at most 4 (2**4 corners)


def _atoms(cond: ir.Expr) -> Iterator[ir.Expr]:
    """The conjuncts of ``cond`` (an AND tree)."""
    if isinstance(cond, ir.Binary) and cond.op == Op.AND:
        yield from _atoms(cond.a)
        yield from _atoms(cond.b)
    else:
        yield cond


def _conjunction(atoms: list[ir.Expr]) -> ir.Expr:
    out: ir.Expr | None = None
    for a in atoms:
        out = a if out is None else ir.Binary(BOOL, Op.AND, out, a)
    return TRUE if out is None else out


def _names(e: ir.Expr) -> set[str]:
    return {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}


def _substitute(e: ir.Expr, values: dict[str, ir.Expr]) -> ir.Expr:
    if isinstance(e, ir.Var) and e.name in values:
        return values[e.name]
    return map_children(e, lambda c: _substitute(c, values))


def _linear(e: ir.Expr, v: str) -> bool:
    """Whether ``e`` is linear in variable ``v`` (sums and constant multiples of it)."""
    if v not in _names(e):
        return True
    if isinstance(e, ir.Var):
        return True
    if isinstance(e, ir.Binary) and e.op in (Op.ADD, Op.SUB):
        return _linear(e.a, v) and _linear(e.b, v)
    if isinstance(e, ir.Binary) and e.op == Op.MUL:
        return (v not in _names(e.a) and _linear(e.b, v)) or (
            v not in _names(e.b) and _linear(e.a, v))
    if isinstance(e, ir.Unary) and e.op == Op.NEG:
        return _linear(e.x, v)
    return False


class _Nest:
    """One top-level loop nest: its loop ranges, and its tests rewritten."""

    def __init__(self, nest: ir.For) -> None:
        stmts = list(ir.walk_stmts((nest,)))
        assigned = [s.var.name for s in stmts if isinstance(s, ir.Assign)]
        self.once = {n for n in assigned if assigned.count(n) == 1}
        self.inner = set(assigned) | {s.var.name for s in stmts if isinstance(s, ir.For)}
        self.loops: dict[str, tuple[int, int]] = {}  # loop var -> (first, last value)
        self.hoisted: dict[ir.Expr, None] = {}  # corner comparisons, in order

    def hoist(self, atom: ir.Expr, defs: dict[str, ir.Expr]) -> bool:
        """Record ``atom``'s corner comparisons when it can be hoisted."""
        if not (isinstance(atom, ir.Binary) and atom.op in _ORDER and atom.a.type == I32):
            return False
        expanded = _substitute(atom, defs)
        names = _names(expanded)
        loops = [v for v in names if v in self.loops]
        if any(n in self.inner and n not in self.loops for n in names):
            return False  # depends on a value the nest assigns that no definition explains
        sides = (expanded.a, expanded.b)  # type: ignore[attr-defined]
        if len(loops) > 4 or not all(_linear(e, v) for e in sides for v in loops):
            return False
        for corner in itertools.product(*[self.loops[v] for v in loops]):
            values = {v: ir.Const(I32, c) for v, c in zip(loops, corner)}
            self.hoisted[_substitute(expanded, values)] = None
        return True

    def block(self, body: tuple[ir.Stmt, ...], defs: dict[str, ir.Expr]) -> tuple[ir.Stmt, ...]:
        defs = dict(defs)  # definitions made in this block dominate the rest of it only
        out = []
        for s in body:
            if isinstance(s, ir.Assign):
                name = s.var.name
                value = _substitute(s.value, defs)
                if name in self.once and s.var.type == I32 and not (
                        _names(value) & (self.inner - set(self.loops))):
                    defs[name] = value
                out.append(s)
            elif isinstance(s, ir.If):
                kept = [a for a in _atoms(s.cond) if not self.hoist(a, defs)]
                then = self.block(s.then, defs)
                orelse = self.block(s.orelse, defs)
                out.append(dataclasses.replace(s, cond=_conjunction(kept), then=then,
                                               orelse=orelse))  # fmt: skip
            elif isinstance(s, ir.For):
                out.append(self.loop(s, defs))
            else:
                out.append(s)
        return tuple(out)

    def loop(self, s: ir.For, defs: dict[str, ir.Expr]) -> ir.For:
        bounds = s.start, s.stop
        if all(isinstance(b, ir.Const) for b in bounds):
            start, stop = (int(b.value) for b in bounds)  # type: ignore[union-attr]
            trips = max(0, -(-(stop - start) // s.step))
            if trips:
                self.loops[s.var.name] = (start, start + s.step * (trips - 1))
        inner = {k: v for k, v in defs.items() if k != s.var.name}
        return dataclasses.replace(s, body=self.block(s.body, inner))


def version_interior(k: ir.KernelIR) -> ir.KernelIR:
    """``k`` with each top-level loop nest split into an interior version without the
    bounds tests that hold on every iteration, and the nest as it was (``k`` itself when
    no test can be hoisted)."""
    body: list[ir.Stmt] = []
    changed = False
    for s in k.body:
        if isinstance(s, ir.For):
            nest = _Nest(s)
            interior = nest.loop(s, {})
            if nest.hoisted:
                corners = list(nest.hoisted)
                if len(corners) <= MAX_CORNERS * 8:
                    body.append(ir.If(s.line, _conjunction(corners), (interior,), (s,)))
                    changed = True
                    continue
        body.append(s)
    return dataclasses.replace(k, body=tuple(body)) if changed else k
