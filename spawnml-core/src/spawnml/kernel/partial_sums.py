"""Float reductions in loops as interleaved partial results, in a fixed order.

``for k in range(n): s = s + f(k)`` is one chain of dependent additions: each waits for the
last (4 cycles on a current x86 core), so a 50,000-element row takes 200,000 cycles however
wide the vectors are. :func:`split_reductions` gives such a loop ``lanes`` accumulators:

    s_0 = s; s_1 = ... = s_{L-1} = identity
    for k0 in range(start, start + L * (n // L), L):     # lane j takes k = k0 + j
        s_j = s_j + f(k0 + j)          (j = 0 .. L-1, statement by statement)
    s = (s_0 + s_1) + (s_2 + s_3) + ...                  # a fixed pairwise tree
    for k in range(start + L * (n // L), stop): s = s + f(k)   # the remainder, in order

The lanes are declared as lane groups, so targets with vectors compute them as vector
accumulators (``spawnml.kernel.vectorize``). The order of every addition depends only on
``n`` and ``lanes``, never on launch ranges or threads: results are deterministic, though
not bit-equal to the serial sum (closer to the exact sum, as pairwise summation is). LLVM's
own reassociation cannot give that (its scalar remainder splits sums differently from its
vector body). ``max``/``min`` reductions are order-independent, so they split exactly.

Only a loop that is innermost, has compile-time bounds and at least ``2 * lanes`` trips, and
whose body is assignments (no branch, store or return) is split; its float accumulators
must each be assigned once, as ``acc = acc + e`` / ``max(acc, e)`` / ``min(acc, e)`` with
``acc`` read nowhere else in the body, and every other variable it assigns (any number of
times) must be assigned before it is read there. Kernels of 16-bit floats keep their sums in
order (their references round in order; a reordered sum can cross an f16 rounding boundary).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

from ..dtypes import DType
from . import ir
from .analysis import trip_count
from .ir import Op
from .tile import rename_vars
from .types import ScalarType

F32 = ScalarType.f32
_NARROW = (DType.float16, DType.bfloat16)
_IDENTITY = {"add": -0.0, "max": -math.inf, "min": math.inf}


def split_reductions(k: ir.KernelIR, lanes: int) -> ir.KernelIR:
    """``k`` with each float reduction loop it qualifies split into ``lanes`` interleaved
    partial results (see the module docstring); ``k`` itself where none qualifies."""
    if lanes < 2 or k.tile or any(b.dtype in _NARROW for b in (*k.inputs, k.output)):
        return k
    split = _Splitter(k, lanes)
    body = split.block(k.body)
    if not split.groups:
        return k
    return dataclasses.replace(k, body=body, locals=k.locals + tuple(split.new_locals),
                               lane_groups=k.lane_groups + tuple(split.groups))


def _reduction(s: ir.Stmt) -> tuple[str, ir.Expr] | None:
    """``(op, e)`` where ``s`` is ``acc = acc + e``, ``max(acc, e)`` or ``min(acc, e)`` on an
    f32 ``acc`` (either operand order); None otherwise."""
    if not (isinstance(s, ir.Assign) and s.var.type is F32):
        return None
    v = s.value
    if isinstance(v, ir.Binary) and v.op == Op.ADD:
        op, args = "add", (v.a, v.b)
    elif isinstance(v, ir.Call) and v.fn in ("max", "min") and len(v.args) == 2:
        op, args = v.fn, v.args
    else:
        return None
    own = [isinstance(a, ir.Var) and a.name == s.var.name for a in args]
    if own.count(True) != 1:
        return None
    return op, args[1] if own[0] else args[0]


def _reads(e: ir.Expr) -> Iterator[str]:
    return (x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var))


class _Splitter:
    def __init__(self, k: ir.KernelIR, lanes: int) -> None:
        self.lanes = lanes
        self.taken = {v.name for v in k.locals}
        self.new_locals: list[ir.Var] = []
        self.groups: list[tuple[str, ...]] = []

    def fresh(self, stem: str, t: ScalarType) -> ir.Var:
        n = 0
        while f"{stem}_p{n}" in self.taken:
            n += 1
        v = ir.Var(t, f"{stem}_p{n}")
        self.taken.add(v.name)
        self.new_locals.append(v)
        return v

    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.For):
                inner = self.block(s.body)
                s = dataclasses.replace(s, body=inner) if inner != s.body else s
                out.extend(self.loop(s) or (s,))
            elif isinstance(s, ir.If):
                out.append(dataclasses.replace(s, then=self.block(s.then),
                                               orelse=self.block(s.orelse)))
            else:
                out.append(s)
        return tuple(out)

    def loop(self, s: ir.For) -> list[ir.Stmt] | None:
        """The statements replacing loop ``s``, or None where it does not qualify."""
        if not (isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const)):
            return None
        if not all(isinstance(x, ir.Assign) for x in s.body):
            return None
        start, lanes = int(s.start.value), self.lanes
        trips = trip_count(start, int(s.stop.value), s.step)
        if trips < 2 * lanes:
            return None
        accs = self.accumulators(s)
        if not accs:
            return None
        main = trips // lanes * lanes
        line = s.line
        copies = {name: [self.fresh(name, t) for _ in range(lanes)]
                  for name, t in self.assigned(s).items()}
        copies[s.var.name] = [self.fresh(s.var.name, s.var.type) for _ in range(lanes)]
        base = self.fresh(s.var.name + "_base", s.var.type)
        out: list[ir.Stmt] = []
        for name, op in accs.items():
            first, *rest = copies[name]
            out.append(ir.Assign(line, first, ir.Var(F32, name)))
            out += [ir.Assign(line, v, ir.Const(F32, _IDENTITY[op])) for v in rest]
        body: list[ir.Stmt] = [
            ir.Assign(line, copies[s.var.name][j],
                      ir.Binary(s.var.type, Op.ADD, ir.Var(base.type, base.name),
                                ir.Const(s.var.type, j * s.step)))
            for j in range(lanes)]
        for stmt in s.body:
            assert isinstance(stmt, ir.Assign)
            for j in range(lanes):
                body.append(ir.Assign(stmt.line, copies[stmt.var.name][j],
                                      _renamed(stmt.value, copies, j)))
        out.append(ir.For(line, base, ir.Const(s.var.type, start),
                          ir.Const(s.var.type, start + main * s.step), s.step * lanes,
                          tuple(body)))
        for name, op in accs.items():
            out.append(ir.Assign(line, ir.Var(F32, name), _tree(op, copies[name])))
        for name in copies:  # after the loop, a variable holds its last iteration's value
            if name not in accs and name != s.var.name and main == trips:
                v = copies[name][-1]
                out.append(ir.Assign(line, ir.Var(v.type, name), ir.Var(v.type, v.name)))
        if main < trips:
            out.append(dataclasses.replace(s, start=ir.Const(s.var.type, start + main * s.step)))
        self.groups += [tuple(v.name for v in vs) for vs in copies.values()]
        return out

    @staticmethod
    def assigned(s: ir.For) -> dict[str, ScalarType]:
        return {x.var.name: x.var.type for x in s.body if isinstance(x, ir.Assign)}

    def accumulators(self, s: ir.For) -> dict[str, str] | None:
        """Accumulator name -> its operation, where the body qualifies; None otherwise."""
        accs: dict[str, str] = {}
        for x in s.body:
            found = _reduction(x)
            if found is not None and x.var.name not in accs:
                accs[x.var.name] = found[0]
        temps = set(self.assigned(s)) - set(accs)
        seen: set[str] = set()
        for x in s.body:
            assert isinstance(x, ir.Assign)
            name = x.var.name
            found = _reduction(x) if name in accs else None
            value = found[1] if found is not None else x.value
            read = set(_reads(value))
            if read & set(accs):
                return None  # an accumulator read elsewhere, or assigned twice
            if read & (temps - seen):
                return None  # read before this iteration assigns it: carried between trips
            if name in accs and (name in seen or found is None):
                return None  # an accumulator assigned twice
            seen.add(name)
        return accs or None


def _renamed(e: ir.Expr, copies: dict[str, list[ir.Var]], j: int) -> ir.Expr:
    """``e`` as lane ``j`` computes it: every variable with copies is its ``j``-th copy."""
    return rename_vars(e, lambda n: copies[n][j].name if n in copies else n)


def _tree(op: str, vs: list[ir.Var]) -> ir.Expr:
    """The lanes combined pairwise, in lane order: ((v0 . v1) . (v2 . v3)) ..."""
    xs: list[ir.Expr] = [ir.Var(v.type, v.name) for v in vs]
    while len(xs) > 1:
        pairs = [_combine(op, xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        xs = pairs + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]


def _combine(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if op == "add":
        return ir.Binary(F32, Op.ADD, a, b)
    return ir.Call(F32, op, (a, b))
