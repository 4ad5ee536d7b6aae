"""Register tiles: one invocation computes a block of outputs, derived from the gather kernel.

A kernel computes one output element per invocation. :func:`tile_kernel` makes one
invocation compute a block of ``tile`` elements (e.g. 4 x 4 over the last two axes of a
MatMul) by *unroll and jam*: the body is copied once per element of the block, with the
output index of each copy substituted, and the copies are merged statement by statement.
A variable whose value is provably the same in several copies (its every assignment is the
same expression of the same variables, under the same control flow) is computed once for
them, so a load that does not depend on a tiled axis (``a[i, k]`` when tiling the columns
``j``) is read once for the whole row of the block and reused from a register. Control flow
whose condition differs between copies is emitted once per group of copies that agree.

Every copy performs exactly the operations of the original invocation, in the same order,
so results are those of the untiled kernel (up to how a target's C compiler contracts
``a * b + c``). Along an axis whose extent the tile does not divide, the last block starts
``tile`` elements before the end, overlapping the block before it (both compute the shared
elements, identically), so no copy ever reads or writes past the tensors and a block's
elements stay neighbours. Interleaved blocks clamp each element instead.

:func:`plan_tile` chooses the block from the kernel itself: among the output axes along
which some load inside a loop is invariant (the reuse a register tile buys), the block of
one or two axes that issues the fewest loads per output; :func:`register_tile` applies it
under a target's budget of outputs per invocation.
Renderers see only :class:`~spawnml.kernel.ir.Store` statements and ``KernelIR.size``,
the number of invocations, now smaller than the output.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import InvalidInputError
from . import ir
from .ir import Op
from .rewrite import PatternMatcher, rewrite
from .types import ScalarType

I32 = ScalarType.i32
_SIDE = 4
"""Outputs along the innermost tiled axis by default (a vector of 4 on targets with vectors;
a target may ask for more, ``Backend.tile_inner``: Wasm takes 8, two vectors)."""
_OUTER_SIDE = 8
"""At most this many along the outer axis of a two-axis block: 4 x 4 under a budget of 16,
8 x 4 under 32 (eight vector accumulators: 80 against 35 GFLOP/s on PoCL at 512^3)."""


def tile_budget(max_outputs: int) -> int:
    """A target's budget of outputs per invocation under ``SPAWNML_TILE``: ``0`` turns
    register tiles off (one output per invocation), ``N`` caps the budget at N, unset or
    ``1`` leaves the target's own."""
    value = os.environ.get("SPAWNML_TILE", "1").strip()
    if not value.isdigit():
        raise InvalidInputError(
            f"SPAWNML_TILE must be 0 (off), 1 (the target's budget) or a number of outputs "
            f"per invocation, not {value!r}"
        )
    n = int(value)
    return 1 if n == 0 else max_outputs if n == 1 else min(n, max_outputs)


# ----------------------------------------------------------------------------- analysis


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def index_axis(e: ir.Expr, shape: Sequence[int]) -> int | None:
    """The output axis ``d`` when ``e`` is the specialiser's ``out.index[d]`` expression
    (``(gid / stride) % extent`` with the divisions it omits), else None."""
    strides = _strides(shape)
    div, mod = 1, None
    if isinstance(e, ir.Binary) and e.op == Op.MOD and isinstance(e.b, ir.Const):
        mod, e = e.b.value, e.a
    if isinstance(e, ir.Binary) and e.op == Op.DIV and isinstance(e.b, ir.Const):
        div, e = e.b.value, e.a
    if not isinstance(e, ir.GlobalIndex):
        return None
    for d, (n, s) in enumerate(zip(shape, strides)):
        if n != 1 and s == div and (mod == n or (mod is None and d == 0)):
            return d
    return None


def _index_assigns(k: ir.KernelIR) -> dict[int, int]:
    """Top-level statement position -> output axis, for the kernel's index prologue."""
    out = {}
    for pos, s in enumerate(k.body):
        if not isinstance(s, ir.Assign):
            break
        d = index_axis(s.value, k.output.shape)
        if d is not None:
            out[pos] = d
    return out


def _returns_last_only(body: tuple[ir.Stmt, ...]) -> bool:
    returns = [s for s in ir.walk_stmts(body) if isinstance(s, ir.Return)]
    return len(returns) == 1 and body and body[-1] is returns[0]


def _vars(e: ir.Expr) -> Iterable[ir.Expr]:
    return (x for x in ir.walk_expr(e) if isinstance(x, ir.Var | ir.GlobalIndex))


def axis_dependence(k: ir.KernelIR, control: bool = True) -> dict[str, frozenset[int]]:
    """Variable name -> the output axes its value can depend on: through data, and with
    ``control`` through the branches and loop bounds it is assigned under."""
    every = frozenset(range(len(k.output.shape)))
    index = {k.body[p].var.name: d for p, d in _index_assigns(k).items()}  # type: ignore[attr-defined]
    deps: dict[str, frozenset[int]] = {}

    def of(e: ir.Expr) -> frozenset[int]:
        out: frozenset[int] = frozenset()
        for x in _vars(e):
            out |= every if isinstance(x, ir.GlobalIndex) else deps.get(x.name, frozenset())
        return out

    def walk(body: tuple[ir.Stmt, ...], ctl: frozenset[int]) -> bool:
        changed = False
        ctl = ctl if control else frozenset()
        for s in body:
            new: tuple[str, frozenset[int]] | None = None
            if isinstance(s, ir.Assign):
                val = frozenset({index[s.var.name]}) if s.var.name in index else of(s.value)
                new = (s.var.name, val | ctl)
            elif isinstance(s, ir.If):
                inner = ctl | of(s.cond)
                changed |= walk(s.then, inner) | walk(s.orelse, inner)
            elif isinstance(s, ir.For):
                inner = ctl | of(s.start) | of(s.stop)
                new = (s.var.name, inner)
                changed |= walk(s.body, inner)
            if new is not None and not new[1] <= deps.get(new[0], frozenset()):
                deps[new[0]] = deps.get(new[0], frozenset()) | new[1]
                changed = True
        return changed

    while walk(k.body, frozenset()):
        pass
    return deps


def loop_loads(k: ir.KernelIR) -> list[frozenset[int]]:
    """For every load inside a loop, the output axes its index value depends on (whether
    the load runs may depend on more: the jam keeps such copies apart)."""
    deps = axis_dependence(k, control=False)
    every = frozenset(range(len(k.output.shape)))

    def of(e: ir.Expr) -> frozenset[int]:
        out: frozenset[int] = frozenset()
        for x in _vars(e):
            out |= every if isinstance(x, ir.GlobalIndex) else deps.get(x.name, frozenset())
        return out

    loads: list[frozenset[int]] = []

    def walk(body: tuple[ir.Stmt, ...], in_loop: bool) -> None:
        for s in body:
            if in_loop:
                loads.extend(of(x.index) for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)
                             if isinstance(x, ir.Load))
            if isinstance(s, ir.If):
                walk(s.then, in_loop)
                walk(s.orelse, in_loop)
            elif isinstance(s, ir.For):
                walk(s.body, True)

    walk(k.body, False)
    return loads


def reuse_axes(k: ir.KernelIR) -> list[int]:
    """Output axes (extent > 1) along which some load inside a loop is invariant: tiling
    them lets one loaded value serve several outputs. Innermost first."""
    every = frozenset(range(len(k.output.shape)))
    invariant = set().union(*(every - deps for deps in loop_loads(k)))
    return sorted((d for d in invariant if k.output.shape[d] > 1), reverse=True)


def loads_per_output(loads: Sequence[frozenset[int]], tile: Sequence[int]) -> float:
    """Loads one iteration of the inner loops issues per output computed, under ``tile``:
    a load is shared by the copies that differ only along axes it does not depend on."""
    outputs = 1
    for t in tile:
        outputs *= t
    total = 0
    for deps in loads:
        n = 1
        for d in deps:
            n *= tile[d]
        total += n
    return total / outputs


def plan_tile(
    k: ir.KernelIR, max_outputs: int, min_invocations: int = 64, inner: int = _SIDE
) -> tuple[int, ...] | None:
    """The register tile for ``k`` (outputs per invocation along each output axis), or None
    when tiling would buy no reuse, the kernel is not in a tileable form, or the budget is 1.

    Among blocks of up to two reuse axes (``inner`` outputs along the inner one, ``_SIDE``
    on an axis shorter than that, up to ``_OUTER_SIDE`` along the outer, within
    ``max_outputs``),
    the one issuing the fewest loads per output wins; ties go to the innermost axes."""
    if max_outputs < 2 or k.output.size < 2 * min_invocations:
        return None
    if not _returns_last_only(k.body) or not _index_assigns(k):
        return None
    shape = k.output.shape
    loads = loop_loads(k)
    axes = reuse_axes(k)
    best: tuple[float, int, list[int]] | None = None
    for chosen in [*itertools.combinations(axes, 1), *itertools.combinations(axes, 2)]:
        tile = [1] * len(shape)
        budget = max_outputs
        for n, d in enumerate(chosen):  # innermost first
            side = _OUTER_SIDE if n else inner if shape[d] >= inner else _SIDE
            tile[d] = min(side, shape[d], budget)
            budget //= max(tile[d], 1)
        while _invocations(shape, tile) < min_invocations and max(tile) > 1:
            d = max(range(len(tile)), key=lambda i: tile[i])
            tile[d] //= 2
        if max(tile) < 2:
            continue
        score = (loads_per_output(loads, tile), -sum(chosen))
        if best is None or score < best[:2]:
            best = (*score, tile)
    return tuple(best[2]) if best is not None else None


def _invocations(shape: Sequence[int], tile: Sequence[int]) -> int:
    n = 1
    for s, t in zip(shape, tile):
        n *= -(-s // t)
    return n


def register_tile(
    k: ir.KernelIR, max_outputs: int, interleave: bool = False, inner: int = _SIDE
) -> ir.KernelIR:
    """``k`` with the register tile :func:`plan_tile` chooses for a target computing up to
    ``max_outputs`` outputs per invocation (``k`` itself when none pays); ``interleave``:
    see :func:`tile_kernel`."""
    if k.tile:
        return k
    tile = plan_tile(k, tile_budget(max_outputs), inner=inner)
    return k if tile is None else tile_kernel(k, tile, interleave)


def vector_tile(
    k: ir.KernelIR, side: int, vectorizes: Callable[[ir.KernelIR], bool],
    min_invocations: int = 64,
) -> ir.KernelIR:
    """``k`` computing ``side`` neighbouring outputs along its innermost axis per invocation
    when that buys no reuse but the copies become vector arithmetic on vector loads (a
    window reduction such as a max pool, a reduction over an outer axis): ``vectorizes``
    (the target's verdict on the tiled kernel) decides. ``k`` itself otherwise, and for
    loop-free kernels (a target vectorises those across invocations, or gains nothing)."""
    shape = k.output.shape
    if (side < 2 or k.tile or not shape or shape[-1] < side
            or k.output.size < side * min_invocations
            or not any(isinstance(s, ir.For) for s in ir.walk_stmts(k.body))
            or not _returns_last_only(k.body) or not _index_assigns(k)):
        return k
    tiled = tile_kernel(k, (*([1] * (len(shape) - 1)), side))
    return tiled if tiled.tile and vectorizes(tiled) else k


# ----------------------------------------------------------------------------- the transform


def _hoist_loads(body: tuple[ir.Stmt, ...], fresh: Iterable[str]) -> tuple[
    tuple[ir.Stmt, ...], list[ir.Var]
]:
    """Every load evaluated unconditionally by an assignment or the return (not under
    ``and``/``or``/a select's branches) bound to its own variable first, so copies that read
    the same element share it."""
    names = iter(fresh)
    new_vars: list[ir.Var] = []

    def lift(e: ir.Expr, pre: list[ir.Stmt], line: int) -> ir.Expr:
        if isinstance(e, ir.Load):
            index = lift(e.index, pre, line)
            var = ir.Var(e.type, next(names))
            new_vars.append(var)
            pre.append(ir.Assign(line, var, dataclasses.replace(e, index=index)))
            return var
        if isinstance(e, ir.Binary) and e.op in (Op.AND, Op.OR):
            return dataclasses.replace(e, a=lift(e.a, pre, line))
        if isinstance(e, ir.Select):
            return dataclasses.replace(e, cond=lift(e.cond, pre, line))
        if isinstance(e, ir.Unary | ir.Cast | ir.Bitcast):
            return dataclasses.replace(e, x=lift(e.x, pre, line))
        if isinstance(e, ir.Binary):
            return dataclasses.replace(e, a=lift(e.a, pre, line), b=lift(e.b, pre, line))
        if isinstance(e, ir.Call):
            return dataclasses.replace(e, args=tuple(lift(a, pre, line) for a in e.args))
        return e

    def block(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Assign) and not isinstance(s.value, ir.Load):
                pre: list[ir.Stmt] = []
                value = lift(s.value, pre, s.line)
                out += [*pre, dataclasses.replace(s, value=value)]
            elif isinstance(s, ir.Return):
                pre = []
                value = lift(s.value, pre, s.line)
                out += [*pre, dataclasses.replace(s, value=value)]
            elif isinstance(s, ir.If):
                out.append(dataclasses.replace(s, then=block(s.then), orelse=block(s.orelse)))
            elif isinstance(s, ir.For):
                out.append(dataclasses.replace(s, body=block(s.body)))
            else:
                out.append(s)
        return tuple(out)

    return block(body), new_vars


def _substitute(body: tuple[ir.Stmt, ...], positions: dict[int, int],
                index: Sequence[ir.Expr], flat: ir.Expr) -> tuple[ir.Stmt, ...]:
    """One copy: the index prologue assigns this copy's output index, ``out.flat`` is its flat
    index and the final return stores there."""
    gid = PatternMatcher([(ir.GlobalIndex, lambda e: flat)], once=True)
    out: list[ir.Stmt] = []
    for pos, s in enumerate(body):
        if pos in positions:
            assert isinstance(s, ir.Assign)
            out.append(dataclasses.replace(s, value=index[positions[pos]]))
        elif isinstance(s, ir.Return):
            out.append(ir.Store(s.line, flat, rewrite(s.value, gid)))
        else:
            out.append(rewrite(s, gid))
    return tuple(out)


def rename_vars(e: ir.Expr, name: Callable[[str], str]) -> ir.Expr:
    """``e`` with every variable renamed (a direct walk: the jam's hot path)."""
    if isinstance(e, ir.Var):
        return ir.Var(e.type, name(e.name))
    if isinstance(e, ir.Const | ir.GlobalIndex):
        return e
    if isinstance(e, ir.Binary):
        return ir.Binary(e.type, e.op, rename_vars(e.a, name), rename_vars(e.b, name))
    if isinstance(e, ir.Load):
        return ir.Load(e.type, e.buffer, rename_vars(e.index, name))
    if isinstance(e, ir.Unary):
        return ir.Unary(e.type, e.op, rename_vars(e.x, name))
    if isinstance(e, ir.Cast | ir.Bitcast):
        return type(e)(e.type, rename_vars(e.x, name))
    if isinstance(e, ir.Select):
        return ir.Select(e.type, *(rename_vars(x, name) for x in (e.cond, e.a, e.b)))
    if isinstance(e, ir.Call):
        return ir.Call(e.type, e.fn, tuple(rename_vars(x, name) for x in e.args))
    return rewrite(e, PatternMatcher([(ir.Var, lambda v: ir.Var(v.type, name(v.name)))],
                                     once=True))


Row = list[Any]
"""One statement position: the statement of every copy there (all of the same class)."""


def _rows(row: Row, field: str) -> list[Row]:
    """The nested block ``field`` of every statement in ``row``, as rows."""
    return [list(x) for x in zip(*(getattr(s, field) for s in row))]


class _Jam:
    """Partition refinement over the copies, then the merged body."""

    def __init__(self, copies: list[tuple[ir.Stmt, ...]]) -> None:
        self.rows = [list(x) for x in zip(*copies)]
        self.n = len(copies)
        self.cls: dict[str, tuple[int, ...]] = {}
        """Variable -> for each copy, the first copy it provably shares its value with."""
        self.types: dict[str, ScalarType] = {}

    # -- partitions
    def part(self, name: str) -> tuple[int, ...]:
        return self.cls.get(name, (0,) * self.n)

    def canon(self, e: ir.Expr, t: int) -> ir.Expr:
        """``e`` of copy ``t`` with each variable named by its class: equal iff provably equal."""
        return rename_vars(e, lambda name: f"{name}#{self.part(name)[t]}")

    def keys(self, row: Row, fields: tuple[str, ...]) -> list[tuple[ir.Expr, ...]]:
        return [tuple(self.canon(getattr(s, f), t) for f in fields) for t, s in enumerate(row)]

    @staticmethod
    def refine(part: Sequence[int], keys: Sequence[object]) -> tuple[int, ...]:
        first: dict[tuple[int, object], int] = {}
        return tuple(first.setdefault((p, key), t) for t, (p, key) in enumerate(zip(part, keys)))

    def assign(self, var: ir.Var, ctl: Sequence[int], keys: Sequence[object]) -> bool:
        self.types[var.name] = var.type
        old = self.part(var.name)
        new = self.refine(self.refine(old, ctl), keys)
        if new != old:
            self.cls[var.name] = new
            return True
        return False

    def analyse(self) -> None:
        while self._walk(self.rows, (0,) * self.n):
            pass

    def _walk(self, rows: list[Row], ctl: tuple[int, ...]) -> bool:
        changed = False
        for row in rows:
            s = row[0]
            if isinstance(s, ir.Assign):
                changed |= self.assign(s.var, ctl, self.keys(row, ("value",)))
            elif isinstance(s, ir.If):
                inner = self.refine(ctl, self.keys(row, ("cond",)))
                changed |= self._walk(_rows(row, "then"), inner)
                changed |= self._walk(_rows(row, "orelse"), inner)
            elif isinstance(s, ir.For):
                inner = self.refine(ctl, self.keys(row, ("start", "stop")))
                changed |= self.assign(s.var, inner, [0] * self.n)
                changed |= self._walk(_rows(row, "body"), inner)
        return changed

    # -- emission
    def name(self, var: str, t: int) -> str:
        part = self.part(var)
        return var if len(set(part)) == 1 else f"{var}_t{part[t]}"

    def rename(self, e: ir.Expr, t: int) -> ir.Expr:
        return rename_vars(e, lambda name: self.name(name, t))

    def locals(self) -> tuple[ir.Var, ...]:
        names = {self.name(v, t): ty for v, ty in self.types.items() for t in range(self.n)}
        return tuple(ir.Var(ty, n) for n, ty in names.items())

    def groups(self, row: Row, group: list[int], fields: tuple[str, ...]) -> list[list[int]]:
        """``group`` split into the copies whose ``fields`` provably agree."""
        keys = self.keys(row, fields)
        by: dict[object, list[int]] = {}
        for t in group:
            by.setdefault(keys[t], []).append(t)
        return list(by.values())

    def emit(self, rows: list[Row], group: list[int]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for row in rows:
            s = row[group[0]]
            if isinstance(s, ir.Assign):
                names = {self.name(s.var.name, t): t for t in reversed(group)}
                out += [ir.Assign(s.line, ir.Var(s.var.type, name), self.rename(row[t].value, t))
                        for name, t in sorted(names.items(), key=lambda kv: kv[1])]
            elif isinstance(s, ir.Store):
                out += [ir.Store(s.line, self.rename(row[t].index, t),
                                 self.rename(row[t].value, t)) for t in group]
            elif isinstance(s, ir.If):
                for sub in self.groups(row, group, ("cond",)):
                    out.append(ir.If(
                        s.line, self.rename(row[sub[0]].cond, sub[0]),
                        tuple(self.emit(_rows(row, "then"), sub)),
                        tuple(self.emit(_rows(row, "orelse"), sub)),
                    ))
            elif isinstance(s, ir.For):
                for sub in self.groups(row, group, ("start", "stop")):
                    c, t = row[sub[0]], sub[0]
                    loop_var = ir.Var(c.var.type, self.name(c.var.name, t))
                    # copies that share this loop but name its variable apart (it is also
                    # assigned where they differ, e.g. another loop under a lane's own
                    # condition) take the loop's value under their own names
                    aliases = sorted({self.name(c.var.name, u) for u in sub} - {loop_var.name})
                    body = [ir.Assign(s.line, ir.Var(c.var.type, n), loop_var) for n in aliases]
                    out.append(ir.For(
                        s.line, loop_var, self.rename(c.start, t), self.rename(c.stop, t),
                        c.step, (*body, *self.emit(_rows(row, "body"), sub)),
                    ))
            else:  # pragma: no cover - tile_kernel admits no other statement
                raise AssertionError(type(s).__name__)
        return out


def _lane_groups(jam: _Jam, lanes: int) -> tuple[tuple[str, ...], ...]:
    """The names of every variable's copies along the innermost tiled axis, per block row,
    where the ``lanes`` copies of the row hold distinct values (copy ``c`` is lane
    ``c % lanes`` of row ``c // lanes``: the copies run over the tile in row-major order)."""
    out = []
    for var in jam.types:
        for row in range(jam.n // lanes):
            names = tuple(jam.name(var, row * lanes + j) for j in range(lanes))
            if len(set(names)) == lanes:
                out.append(names)
    return tuple(out)


def tile_kernel(k: ir.KernelIR, tile: Sequence[int], interleave: bool = False) -> ir.KernelIR:
    """``k`` computing a block of ``tile[d]`` outputs along each output axis ``d`` per
    invocation (see the module docstring); ``k`` itself when it is not in a tileable form
    (a return before the end, or no index prologue).

    ``interleave``: along the innermost axis (when it is the output's last non-unit axis),
    copy ``j`` of invocation ``g`` computes element ``g + j * G`` (G blocks along the axis)
    instead of ``g * T + j``, so neighbouring invocations read and write neighbouring
    elements: the layout targets that vectorise across invocations (PoCL, llvmpipe) and
    GPUs coalescing memory accesses want."""
    shape = k.output.shape
    tile = tuple(max(1, min(t, n)) for t, n in zip(tile, shape))
    positions = _index_assigns(k)
    if len(tile) != len(shape) or max(tile, default=1) == 1 or not positions:
        return k
    if not _returns_last_only(k.body):
        return k
    line = k.body[0].line
    taken = {v.name for v in k.locals}
    fresh = (f"ld{n}" for n in itertools.count() if f"ld{n}" not in taken)
    body, _ = _hoist_loads(k.body, fresh)

    # The invocation's block origin, once: base[d] = (gid over the grid of blocks) * tile[d].
    grid = [-(-n // t) for n, t in zip(shape, tile)]
    inner = max(d for d in range(len(tile)) if tile[d] > 1)
    spread = interleave and all(n == 1 for n in shape[inner + 1:])
    prologue: list[ir.Stmt] = []
    base: list[ir.Expr] = []
    gid: ir.Expr = ir.GlobalIndex(I32)
    for d, (g, gs) in enumerate(zip(grid, _strides(grid))):
        e = gid if gs == 1 else ir.Binary(I32, Op.DIV, gid, ir.Const(I32, gs))
        if d > 0 and g != 1:
            e = ir.Binary(I32, Op.MOD, e, ir.Const(I32, g))
        if g == 1:
            e = ir.Const(I32, 0)
        if tile[d] != 1 and not (spread and d == inner):
            e = ir.Binary(I32, Op.MUL, e, ir.Const(I32, tile[d]))
            if shape[d] % tile[d]:  # the last block ends at the edge, overlapping the one before
                e = ir.Call(I32, "min", (e, ir.Const(I32, shape[d] - tile[d])))
        var = ir.Var(I32, f"tb{d}")
        prologue.append(ir.Assign(line, var, e))
        base.append(var)

    def at(d: int, j: int) -> ir.Expr:
        if j == 0:
            return base[d]
        step = grid[d] if spread and d == inner else 1
        e: ir.Expr = ir.Binary(I32, Op.ADD, base[d], ir.Const(I32, j * step))
        if spread and d == inner and shape[d] % tile[d]:
            e = ir.Call(I32, "min", (e, ir.Const(I32, shape[d] - 1)))
        return e

    strides = _strides(shape)
    copies = []
    for offs in itertools.product(*(range(t) for t in tile)):
        index = [at(d, j) for d, j in enumerate(offs)]
        flat: ir.Expr | None = None
        for d, e in enumerate(index):
            if shape[d] == 1:
                continue
            term = e if strides[d] == 1 else ir.Binary(I32, Op.MUL, e, ir.Const(I32, strides[d]))
            flat = term if flat is None else ir.Binary(I32, Op.ADD, flat, term)
        copies.append(_substitute(body, positions, index, flat or ir.Const(I32, 0)))

    jam = _Jam(copies)
    jam.analyse()
    merged = jam.emit(jam.rows, list(range(len(copies))))
    assigned = jam.locals()
    names = {v.name for v in assigned}
    untouched = tuple(v for v in k.locals if v.name not in names and v.name not in jam.types)
    return dataclasses.replace(
        k,
        locals=(*base, *untouched, *assigned),
        body=(*prologue, *merged),
        tile=tile,
        lane_groups=() if spread else _lane_groups(jam, tile[inner]),
        key=f"{k.key}@t{'x'.join(map(str, tile))}{'i' if spread else ''}" if k.key else "",
    )


__all__ = ["plan_tile", "register_tile", "reuse_axes", "tile_budget", "tile_kernel",
           "vector_tile"]
