"""Value ranges of i32 expressions, and the comparisons and branches they decide.

Index math in kernels is full of tests a human can see are always true: ``0 <= ix < W`` in a
convolution without padding, ``o < n`` where ``o`` is an output index. Each costs a branch per
inner-loop iteration, and a branch that differs between invocations stops devices that
vectorise across invocations (PoCL, llvmpipe) from doing so. :func:`fold_ranges` tracks an
interval for every i32 variable along the kernel (flow-sensitive: assignments, both arms of a
branch, loops to a fixed point with widening), and replaces every comparison whose outcome the
intervals decide by a constant, then drops the dead arm of every branch so decided. Loads whose
index the intervals keep inside their buffer are marked ``in_range`` (Wasm then reads them
without clamping).

Intervals are exact bounds of the mathematical values; an interval that leaves the i32 range
becomes unknown, so wrapping arithmetic is never reasoned about.
"""

from __future__ import annotations

import dataclasses

from . import ir
from .ir import Op
from .types import ScalarType

I32 = ScalarType.i32
BOOL = ScalarType.bool
_LO, _HI = -(2**31), 2**31 - 1

Interval = tuple[int, int] | None
"""``(lo, hi)`` inclusive, or None: unknown."""

Env = dict[str, Interval]


def _fit(lo: int, hi: int) -> Interval:
    return (lo, hi) if _LO <= lo <= hi <= _HI else None


def _join(a: Interval, b: Interval) -> Interval:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _join_env(a: Env, b: Env) -> Env:
    return {n: _join(a.get(n), b.get(n)) for n in a.keys() | b.keys()}


def _trunc_div(a: int, c: int) -> int:
    q = abs(a) // abs(c)
    return q if (a >= 0) == (c > 0) else -q


def _arith(op: Op, a: Interval, b: Interval) -> Interval:
    if a is None or b is None:
        return None
    if op == Op.ADD:
        return _fit(a[0] + b[0], a[1] + b[1])
    if op == Op.SUB:
        return _fit(a[0] - b[1], a[1] - b[0])
    if op == Op.MUL:
        corners = [x * y for x in a for y in b]
        return _fit(min(corners), max(corners))
    if b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == Op.DIV:  # C division (truncating) by a positive constant: monotone
            return _fit(_trunc_div(a[0], c), _trunc_div(a[1], c))
        if op == Op.MOD:
            if a[0] >= 0:
                return (a[0], a[1]) if a[1] < c else (0, c - 1)
            return (-(c - 1), c - 1)
    return None


def _call(fn: str, args: list[Interval]) -> Interval:
    if any(a is None for a in args):
        return None
    if fn in ("min", "max") and len(args) >= 2:
        pick = min if fn == "min" else max
        return (pick(a[0] for a in args), pick(a[1] for a in args))  # type: ignore[index]
    if len(args) == 2 and args[1][0] == args[1][1] and args[1][0] > 0:  # type: ignore[index]
        c = args[1][0]  # type: ignore[index]
        lo, hi = args[0]  # type: ignore[misc]
        if fn == "floordiv":
            return (lo // c, hi // c)
        if fn == "floormod":
            return (lo, hi) if 0 <= lo and hi < c else (0, c - 1)
    return None


_DECIDE = {
    Op.LT: lambda a, b: True if a[1] < b[0] else False if a[0] >= b[1] else None,
    Op.LE: lambda a, b: True if a[1] <= b[0] else False if a[0] > b[1] else None,
    Op.GT: lambda a, b: True if a[0] > b[1] else False if a[1] <= b[0] else None,
    Op.GE: lambda a, b: True if a[0] >= b[1] else False if a[1] < b[0] else None,
}


def _is_bool(e: ir.Expr, value: bool) -> bool:
    return isinstance(e, ir.Const) and e.type == BOOL and e.value is value


class _Folder:
    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.changed = False

    # -- expressions: (simplified expression, its interval when i32)
    def expr(self, e: ir.Expr, env: Env) -> tuple[ir.Expr, Interval]:
        if isinstance(e, ir.Const):
            if e.type == I32:
                return e, (int(e.value), int(e.value))
            return e, None
        if isinstance(e, ir.Var):
            return e, env.get(e.name) if e.type == I32 else None
        if isinstance(e, ir.GlobalIndex):
            return e, (0, max(self.k.size - 1, 0))
        if isinstance(e, ir.Binary):
            a, ra = self.expr(e.a, env)
            b, rb = self.expr(e.b, env)
            e = dataclasses.replace(e, a=a, b=b) if (a is not e.a or b is not e.b) else e
            if e.op in _DECIDE and a.type == I32 and ra is not None and rb is not None:
                decided = _DECIDE[e.op](ra, rb)
                if decided is not None:
                    self.changed = True
                    return ir.Const(BOOL, decided), None
            if e.op in (Op.AND, Op.OR):
                return self.logic(e), None
            if e.type == I32:
                return e, _arith(e.op, ra, rb)
            return e, None
        if isinstance(e, ir.Call):
            pairs = [self.expr(a, env) for a in e.args]
            args = tuple(p[0] for p in pairs)
            if args != e.args:
                e = dataclasses.replace(e, args=args)
            return e, _call(e.fn, [p[1] for p in pairs]) if e.type == I32 else None
        if isinstance(e, ir.Select):
            c, _ = self.expr(e.cond, env)
            a, ra = self.expr(e.a, env)
            b, rb = self.expr(e.b, env)
            if isinstance(c, ir.Const) and c.type == BOOL:
                self.changed = True
                return (a, ra) if c.value else (b, rb)
            return ir.Select(e.type, c, a, b), _join(ra, rb) if e.type == I32 else None
        if isinstance(e, ir.Unary):
            x, rx = self.expr(e.x, env)
            if e.op == Op.NOT and isinstance(x, ir.Const) and x.type == BOOL:
                return ir.Const(BOOL, not x.value), None
            r = None
            if e.op == Op.NEG and e.type == I32 and rx is not None:
                r = _fit(-rx[1], -rx[0])
            return (e if x is e.x else dataclasses.replace(e, x=x)), r
        if isinstance(e, ir.Load):
            x, rx = self.expr(e.index, env)
            size = self.k.inputs[e.buffer].size
            inside = e.in_range or (rx is not None and 0 <= rx[0] and rx[1] < size)
            if x is e.index and inside == e.in_range:
                return e, None
            self.changed |= inside and not e.in_range
            return dataclasses.replace(e, index=x, in_range=inside), None
        if isinstance(e, ir.Cast | ir.Bitcast):
            field = "x"
            x, rx = self.expr(getattr(e, field), env)
            new = e if x is getattr(e, field) else dataclasses.replace(e, **{field: x})
            r = (0, 1) if isinstance(e, ir.Cast) and e.x.type == BOOL and e.type == I32 else None
            return new, r
        return e, None

    @staticmethod
    def logic(e: ir.Binary) -> ir.Expr:
        absorbing, neutral = (False, True) if e.op == Op.AND else (True, False)
        for x, other in ((e.a, e.b), (e.b, e.a)):
            if _is_bool(x, absorbing):
                return ir.Const(BOOL, absorbing)
            if _is_bool(x, neutral):
                return other
        return e

    # -- statements
    def block(self, stmts: tuple[ir.Stmt, ...], env: Env) -> tuple[list[ir.Stmt], Env]:
        out: list[ir.Stmt] = []
        for s in stmts:
            new, env = self.stmt(s, env)
            out += new
        return out, env

    def stmt(self, s: ir.Stmt, env: Env) -> tuple[list[ir.Stmt], Env]:
        if isinstance(s, ir.Assign):
            value, r = self.expr(s.value, env)
            env = {**env, s.var.name: r if s.var.type == I32 else None}
            return [s if value is s.value else dataclasses.replace(s, value=value)], env
        if isinstance(s, ir.Return | ir.Store):
            fields = {f: self.expr(getattr(s, f), env)[0]
                      for f in ("index", "value") if hasattr(s, f)}
            return [dataclasses.replace(s, **fields)], env
        if isinstance(s, ir.If):
            cond, _ = self.expr(s.cond, env)
            if isinstance(cond, ir.Const) and cond.type == BOOL:
                self.changed = True
                return self.block(s.then if cond.value else s.orelse, env)
            then, env_then = self.block(s.then, self.refine(cond, env))
            orelse, env_else = self.block(s.orelse, env)
            return [ir.If(s.line, cond, tuple(then), tuple(orelse))], _join_env(env_then, env_else)
        if isinstance(s, ir.For):
            return self.loop(s, env)
        return [s], env

    def refine(self, cond: ir.Expr, env: Env) -> Env:
        """``env`` narrowed by what ``cond`` being true says: each conjunct ``x < y`` (or
        ``<=``, ``>``, ``>=``) where one side is a variable plus a constant bounds that
        variable by the other side's interval (the interior versions of loop nests,
        ``spawnml.kernel.interior``, test their invocation's position this way)."""
        if isinstance(cond, ir.Binary) and cond.op == Op.AND:
            return self.refine(cond.b, self.refine(cond.a, env))
        if not (isinstance(cond, ir.Binary) and cond.op in _FLIP and cond.a.type == I32):
            return env
        small, large = (cond.a, cond.b) if cond.op in (Op.LT, Op.LE) else (cond.b, cond.a)
        strict = 1 if cond.op in (Op.LT, Op.GT) else 0
        changed = self.changed
        r_small, r_large = self.expr(small, env)[1], self.expr(large, env)[1]
        self.changed = changed  # evaluated for their intervals only
        env = dict(env)
        for side, other, upper in ((small, r_large, True), (large, r_small, False)):
            found = _offset(side)
            if found is None or other is None:
                continue
            name, k = found
            known = env.get(name)
            if known is None or not (_LO <= known[0] + k and known[1] + k <= _HI):
                continue  # name + k may wrap: the test says nothing exact about name
            lo, hi = known
            if upper:  # name + k <= other.hi (- 1 when strict)
                hi = min(hi, other[1] - strict - k)
            else:  # other.lo (+ 1 when strict) <= name + k
                lo = max(lo, other[0] + strict - k)
            env[name] = (lo, hi) if lo <= hi else env.get(name)
        return env

    def loop(self, s: ir.For, env: Env) -> tuple[list[ir.Stmt], Env]:
        start, r0 = self.expr(s.start, env)
        stop, r1 = self.expr(s.stop, env)
        var: Interval = None
        if r0 is not None and r1 is not None:
            var = _fit(r0[0], r1[1] - 1) if s.step > 0 else _fit(r1[0] + 1, r0[1])
        entry = dict(env)
        for rounds in range(8):  # the body's effect on its own entry, to a fixed point
            changed = self.changed
            _, after = self.block(s.body, {**entry, s.var.name: var})
            self.changed = changed
            joined = _join_env(entry, after)
            if joined == entry:
                break
            if rounds >= 3:  # widen what still moves
                joined = {n: (r if entry.get(n) == r else None) for n, r in joined.items()}
            entry = joined
        body, after = self.block(s.body, {**entry, s.var.name: var})
        exit_env = _join_env(entry, after)
        exit_env[s.var.name] = None
        return [dataclasses.replace(s, start=start, stop=stop, body=tuple(body))], exit_env


_FLIP = (Op.LT, Op.LE, Op.GT, Op.GE)


def _offset(e: ir.Expr) -> tuple[str, int] | None:
    """``(name, k)`` when ``e`` is variable ``name`` plus the constant ``k``."""
    if isinstance(e, ir.Var) and e.type == I32:
        return e.name, 0
    if isinstance(e, ir.Binary) and e.op in (Op.ADD, Op.SUB):
        sign = 1 if e.op == Op.ADD else -1
        if isinstance(e.b, ir.Const) and e.b.type == I32:
            inner = _offset(e.a)
            return None if inner is None else (inner[0], inner[1] + sign * int(e.b.value))
        if e.op == Op.ADD and isinstance(e.a, ir.Const) and e.a.type == I32:
            inner = _offset(e.b)
            return None if inner is None else (inner[0], inner[1] + int(e.a.value))
    return None


def fold_ranges(k: ir.KernelIR) -> ir.KernelIR:
    """``k`` with the comparisons its value ranges decide replaced by constants and the
    branches they decide removed (``k`` itself when nothing was decided)."""
    folder = _Folder(k)
    # locals start at zero
    initial: Env = {v.name: (0, 0) if v.type == I32 else None for v in k.locals}
    body, _ = folder.block(k.body, initial)
    if not folder.changed:
        return k
    return dataclasses.replace(k, body=tuple(body))
