"""Vector arithmetic from register tiles: the copies of a tile along its innermost axis become
the lanes of one vector (superword-level parallelism, as in LLVM's SLP vectoriser).

A register tile (``spawnml.kernel.tile``) computes a block of outputs by running copies of
the gather kernel side by side. Along the innermost axis those copies execute the same
operations on neighbouring elements: ``acc_t0 = acc_t0 + a * b_t0``, ``acc_t1 = acc_t1 + a *
b_t1``, ... . :func:`vectorize` turns every such run of statements into one statement on a
vector (``acc = acc + a * b`` on a ``float4``), reads neighbouring input elements with one
vector load and writes neighbouring outputs with one vector store. On CPU-emulated OpenCL
(PoCL) this is what makes the arithmetic SIMD: a 512^3 GEMM goes from 12 to 45 GFLOP/s.

It runs last, on target-ready IR, for targets whose traits declare ``vector_width``; the
result computes exactly what the scalar copies did, lane by lane, in the same order. A
variable becomes a vector when some run assigning its lanes is vector arithmetic, a vector
load or a splat (not a mere gathering of scalars); its other assignments write single lanes,
and everything else stays scalar, reading single lanes where it needs them. Before that,
straight-line code is reordered (as its dependences allow) so lanes follow each other, and
a stretch of one ``If`` per lane becomes "all lanes' conditions hold: the lanes side by
side, else: as before", so a padded convolution runs as vectors inside the image.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from ..dtypes import DType
from ..errors import InvalidInputError
from . import ir
from .ir import Op
from .types import ScalarType

F32 = ScalarType.f32
_VECTOR_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.DIV)

Strides = dict[tuple[str, ...], int | None]
"""A group of lane variables -> the constant step between neighbouring lanes' values, None
when unknown (only integer groups are tracked: they address the loads and stores)."""


def vector_width(target_width: int) -> int:
    """A target's vector width under ``SPAWNML_VECTORIZE``: ``0`` turns vectors off, unset
    or ``1`` keeps the target's own."""
    value = os.environ.get("SPAWNML_VECTORIZE", "1").strip()
    if value not in ("0", "1"):
        raise InvalidInputError(
            f"SPAWNML_VECTORIZE must be 0 (scalar copies) or 1 (the target's vectors), not "
            f"{value!r}"
        )
    return target_width if value == "1" else 1


def vectorize(k: ir.KernelIR, width: int,
              storage: Callable[[DType], DType] = lambda dt: dt,
              max_stride: int = 1, calls: frozenset[str] = frozenset()) -> ir.KernelIR:
    """``k`` with its register tile's innermost copies as vectors of up to ``width`` lanes
    (``k`` itself when nothing pays); ``storage`` maps a logical dtype to the stored one;
    ``max_stride``: the largest step between the lanes of a vector load the target has;
    ``calls``: the intrinsics it computes lane-wise on vectors (``VecCall``)."""
    types = {v.name: v.type for v in k.locals}
    groups = [g[i:i + width] for g in k.lane_groups if len(g) > width and len(g) % width == 0
              for i in range(0, len(g), width)]  # a row longer than a vector: several
    groups += [g for g in k.lane_groups if len(g) <= width]
    candidates = [g for g in groups if 2 <= len(g) <= width and len(g) in (2, 4, 8, 16)
                  and all(n in types for n in g)]
    if not candidates:
        return k
    lane_of = {n: (g, j) for g in candidates for j, n in enumerate(g)}
    k = dataclasses.replace(k, body=_cluster(_split_lane_branches(k.body, lane_of), lane_of))
    loop_vars = {s.var.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)}
    floats = {g for g in candidates if all(types[n] is F32 and n not in loop_vars for n in g)}
    ints = [g for g in candidates if types[g[0]] is ScalarType.i32]
    while True:
        v = _Vectorizer(k, floats, ints, storage, width, max_stride, calls)
        body = v.block(k.body, {})
        if v.paying == floats:
            break
        floats &= v.paying
    if not floats and not v.stores:
        return k
    lanes = {n for g in floats for n in g}
    vectors = tuple(ir.VectorVar(_vector_name(g), F32, g) for g in sorted(floats))
    return dataclasses.replace(
        k, body=body, locals=tuple(x for x in k.locals if x.name not in lanes), vectors=vectors,
    )


Lane = tuple[tuple[str, ...], int]


def _cluster(body: tuple[ir.Stmt, ...], lane_of: dict[str, Lane]) -> tuple[ir.Stmt, ...]:
    """``body`` with each straight-line stretch reordered, as its data dependences allow, so
    that the assignments of a group's lanes follow each other (copies that the jam emitted
    one after another, e.g. from a branch the value ranges removed, become a run)."""
    out: list[ir.Stmt] = []
    stretch: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Assign | ir.Store):
            stretch.append(s)
            continue
        out += _schedule(stretch, lane_of)
        stretch = []
        if isinstance(s, ir.For):
            s = dataclasses.replace(s, body=_cluster(s.body, lane_of))
        elif isinstance(s, ir.If):
            s = dataclasses.replace(s, then=_cluster(s.then, lane_of),
                                    orelse=_cluster(s.orelse, lane_of))
        out.append(s)
    return tuple(out + _schedule(stretch, lane_of))


def _split_lane_branches(body: tuple[ir.Stmt, ...], lane_of: dict[str, Lane]
                         ) -> tuple[ir.Stmt, ...]:
    """Each stretch of one ``If`` per lane (the jam emits those where a condition depends on
    the lane, e.g. a convolution's padding test) as ``if (every lane's condition) {the lanes'
    statements side by side} else {the Ifs as they were}``: inside a tensor the lanes run as
    vectors, at its edges as before."""
    out: list[ir.Stmt] = []
    i = 0
    while i < len(body):
        s = body[i]
        if isinstance(s, ir.For):
            out.append(dataclasses.replace(s, body=_split_lane_branches(s.body, lane_of)))
        elif isinstance(s, ir.If):
            lanes = _lane_ifs(body[i:], lane_of)
            if lanes:
                ifs = body[i:i + lanes]
                cond = ifs[0].cond  # type: ignore[attr-defined]
                for other in ifs[1:]:
                    cond = ir.Binary(ScalarType.bool, Op.AND, cond, other.cond)  # type: ignore[attr-defined]
                side_by_side = tuple(x for row in zip(*(f.then for f in ifs)) for x in row)  # type: ignore[attr-defined]
                out.append(ir.If(s.line, cond, side_by_side, ifs))
                i += lanes
                continue
            out.append(dataclasses.replace(s, then=_split_lane_branches(s.then, lane_of),
                                           orelse=_split_lane_branches(s.orelse, lane_of)))
        else:
            out.append(s)
        i += 1
    return tuple(out)


def _lane_ifs(stmts: Sequence[ir.Stmt], lane_of: dict[str, Lane]) -> int:
    """How many of the leading statements are one ``If`` per lane of a group: no ``else``,
    straight-line bodies of equal length whose every assignment at one position assigns the
    same group's lanes in order (0 when they are not)."""
    first = stmts[0]
    if not isinstance(first, ir.If) or first.orelse or not first.then:
        return 0
    head = first.then[0]
    if not isinstance(head, ir.Assign) or head.var.name not in lane_of:
        return 0
    group, lane = lane_of[head.var.name]
    n = len(group)
    ifs = stmts[:n]
    if lane != 0 or len(ifs) < n or not all(
            isinstance(f, ir.If) and not f.orelse and len(f.then) == len(first.then)
            for f in ifs):
        return 0
    for row in zip(*(f.then for f in ifs)):  # type: ignore[attr-defined]
        if not all(isinstance(x, ir.Assign) and x.var.name in lane_of for x in row):
            return 0
        g = lane_of[row[0].var.name][0]  # type: ignore[attr-defined]
        if tuple(x.var.name for x in row) != g:  # type: ignore[attr-defined]
            return 0
    return n


def _schedule(stmts: list[ir.Stmt], lane_of: dict[str, Lane]) -> list[ir.Stmt]:
    """A list schedule of straight-line ``stmts``: the earliest ready statement, except that
    the next lane of the group just assigned goes first when it is ready."""
    if len(stmts) < 2 or not any(isinstance(s, ir.Assign) and s.var.name in lane_of
                                 for s in stmts):
        return stmts
    reads = [{e.name for x in ir.stmt_exprs(s) for e in ir.walk_expr(x) if isinstance(e, ir.Var)}
             for s in stmts]
    writes = [{s.var.name} if isinstance(s, ir.Assign) else {"<out>"} for s in stmts]
    deps = [{i for i in range(j) if writes[i] & (reads[j] | writes[j]) or reads[i] & writes[j]}
            for j in range(len(stmts))]
    done: set[int] = set()
    order: list[int] = []
    last: Lane | None = None
    while len(order) < len(stmts):
        pick = None
        if last is not None and last[1] + 1 < len(last[0]):
            want = last[0][last[1] + 1]
            nxt = next((i for i in range(len(stmts)) if i not in done
                        and isinstance(stmts[i], ir.Assign) and stmts[i].var.name == want), None)  # type: ignore[attr-defined]
            if nxt is not None and deps[nxt] <= done:
                pick = nxt
        if pick is None:
            pick = next(i for i in range(len(stmts)) if i not in done and deps[i] <= done)
        done.add(pick)
        order.append(pick)
        s = stmts[pick]
        last = lane_of.get(s.var.name) if isinstance(s, ir.Assign) else None
    return [stmts[i] for i in order]


def _vector_name(group: Sequence[str]) -> str:
    return f"{group[0]}_v{len(group)}"


def _is_run(stmts: Sequence[ir.Stmt], group: Sequence[str]) -> bool:
    return len(stmts) == len(group) and all(
        isinstance(s, ir.Assign) and s.var.name == n for s, n in zip(stmts, group))


def _offset(e: ir.Expr) -> tuple[ir.Expr, int]:
    """``e`` as ``base + constant`` (the constant 0 when it has no such form)."""
    if isinstance(e, ir.Binary) and isinstance(e.b, ir.Const) and e.type.is_int:
        if e.op == Op.ADD:
            return e.a, int(e.b.value)
        if e.op == Op.SUB:
            return e.a, -int(e.b.value)
    return e, 0


def _progression(values: Sequence[int]) -> int | None:
    """The step of an arithmetic progression, None if ``values`` is not one."""
    step = values[1] - values[0]
    ok = all(v == values[0] + j * step for j, v in enumerate(values))
    return step if ok else None


def _store_run(stmts: Sequence[ir.Stmt], lanes: int) -> bool:
    return len(stmts) == lanes and all(isinstance(s, ir.Store) for s in stmts)


class _Vectorizer:
    """One pass over the body with a candidate set of vector groups: the new body, the
    candidates that pay (``paying``: some run of theirs is vector arithmetic, a vector load or
    a splat) and the vector stores made."""

    def __init__(self, k: ir.KernelIR, floats: set[tuple[str, ...]],
                 ints: Sequence[tuple[str, ...]], storage: Callable[[DType], DType],
                 width: int, max_stride: int = 1, calls: frozenset[str] = frozenset()
                 ) -> None:
        self.k = k
        self.width = width
        self.max_stride = max_stride
        self.calls = calls
        self.floats = floats
        self.first = {g[0]: g for g in (*floats, *ints)}
        self.ints = set(ints)
        self.f32_inputs = {i for i, b in enumerate(k.inputs) if storage(b.dtype) is DType.float32}
        self.f32_output = storage(k.output.dtype) is DType.float32
        self.paying: set[tuple[str, ...]] = set()
        self.stores = 0

    # -- strides of integer lanes (they index the loads and stores)
    def stride(self, lanes: Sequence[ir.Expr], env: Strides) -> int | None:
        first = lanes[0]
        if all(e == first for e in lanes):
            return 0
        split = [_offset(e) for e in lanes]
        if all(base == split[0][0] for base, _ in split):  # x, x + 1, x + 2, ...
            return _progression([c for _, c in split])
        if all(isinstance(e, ir.Const) and e.type.is_int for e in lanes):
            return _progression([int(e.value) for e in lanes])  # type: ignore[attr-defined]
        if all(isinstance(e, ir.Var) for e in lanes):
            names = tuple(e.name for e in lanes)  # type: ignore[attr-defined]
            return env.get(names, 0) if names in self.ints else None
        if all(isinstance(e, ir.Binary) and e.op == first.op for e in lanes):  # type: ignore[attr-defined]
            a = self.stride([e.a for e in lanes], env)  # type: ignore[attr-defined]
            b = self.stride([e.b for e in lanes], env)  # type: ignore[attr-defined]
            if a is None or b is None:
                return None
            op = first.op  # type: ignore[attr-defined]
            if op == Op.ADD:
                return a + b
            if op == Op.SUB:
                return a - b
            if op == Op.MUL:
                ca, cb = first.a, first.b  # type: ignore[attr-defined]
                if b == 0 and isinstance(cb, ir.Const):
                    return a * int(cb.value)
                if a == 0 and isinstance(ca, ir.Const):
                    return b * int(ca.value)
                return 0 if a == b == 0 else None
        return None

    # -- vector expressions
    def vec(self, lanes: Sequence[ir.Expr], env: Strides) -> ir.VecExpr:
        n, first, t = len(lanes), lanes[0], lanes[0].type
        if all(e == first for e in lanes):
            return ir.VecSplat(t, n, first)
        if t is F32 and all(isinstance(e, ir.Var) for e in lanes):
            names = tuple(e.name for e in lanes)  # type: ignore[attr-defined]
            if names in self.floats:
                return ir.VecRef(t, n, _vector_name(names))
        if (t is F32 and isinstance(first, ir.Binary) and first.op in _VECTOR_OPS
                and all(isinstance(e, ir.Binary) and e.op == first.op for e in lanes)):
            return ir.VecBinary(t, n, first.op,
                                self.vec([e.a for e in lanes], env),  # type: ignore[attr-defined]
                                self.vec([e.b for e in lanes], env))  # type: ignore[attr-defined]
        if (t is F32 and isinstance(first, ir.Call) and first.fn in self.calls
                and all(isinstance(e, ir.Call) and e.fn == first.fn for e in lanes)
                and all(a.type is F32 for a in first.args)):
            return ir.VecCall(t, n, first.fn, tuple(
                self.vec([e.args[j] for e in lanes], env)  # type: ignore[attr-defined]
                for j in range(len(first.args))))
        if (t is F32 and isinstance(first, ir.Load) and first.buffer in self.f32_inputs
                and all(isinstance(e, ir.Load) and e.buffer == first.buffer for e in lanes)):
            step = self.stride([e.index for e in lanes], env)  # type: ignore[attr-defined]
            if step is not None and 1 <= step <= self.max_stride:
                return ir.VecLoad(t, n, first.buffer, first.index,
                                  all(e.in_range for e in lanes), step)  # type: ignore[attr-defined]
        return ir.VecLanes(t, n, tuple(lanes))

    # -- statements
    def block(self, stmts: tuple[ir.Stmt, ...], env: Strides) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        i = 0
        while i < len(stmts):
            s = stmts[i]
            if isinstance(s, ir.Assign) and s.var.name in self.first:
                g = self.first[s.var.name]
                run = stmts[i:i + len(g)]
                if _is_run(run, g):
                    values = [r.value for r in run]  # type: ignore[attr-defined]
                    if g in self.ints:
                        env[g] = self.stride(values, env)
                        out += run
                        i += len(g)
                        continue
                    if g in self.floats:
                        value = self.vec(values, env)
                        if not isinstance(value, ir.VecLanes):
                            self.paying.add(g)
                        out.append(ir.VecAssign(s.line, _vector_name(g), value))
                        i += len(g)
                        continue
            if isinstance(s, ir.Store) and self.f32_output and self.k.tile:
                lanes = self.k.tile[max(d for d, t in enumerate(self.k.tile) if t > 1)]
                if lanes > self.width and lanes % self.width == 0:
                    lanes = self.width  # a row longer than a vector: one store per vector
                run = stmts[i:i + lanes]
                if _store_run(run, lanes) and lanes > 1 and all(
                        r.value.type is F32 for r in run):  # type: ignore[attr-defined]
                    index = [r.index for r in run]  # type: ignore[attr-defined]
                    if self.stride(index, env) == 1:
                        value = self.vec([r.value for r in run], env)  # type: ignore[attr-defined]
                        out.append(ir.VecStore(s.line, index[0], value))
                        self.stores += 1
                        i += lanes
                        continue
            if isinstance(s, ir.Assign):
                for g in self.ints:
                    if s.var.name in g:
                        env[g] = None
            elif isinstance(s, ir.For):
                for g in self.ints:  # a loop variable per lane: its step is not tracked
                    if s.var.name in g:
                        env[g] = None
                s = dataclasses.replace(s, body=self.loop(s.body, env))
            elif isinstance(s, ir.If):
                then_env, else_env = dict(env), dict(env)
                s = dataclasses.replace(s, then=self.block(s.then, then_env),
                                        orelse=self.block(s.orelse, else_env))
                for g in set(then_env) | set(else_env):
                    a, b = then_env.get(g, 0), else_env.get(g, 0)
                    env[g] = a if a == b else None
            out.append(s)
            i += 1
        return tuple(out)

    def loop(self, body: tuple[ir.Stmt, ...], env: Strides) -> tuple[ir.Stmt, ...]:
        """A loop body under the strides that hold at its head on every iteration: where
        the entry and the end of the body disagree, unknown (to a fixed point). A variable
        not yet assigned holds 0 in every lane (stride 0): locals start at zero."""
        head = dict(env)
        seen = set(self.paying), self.stores  # trial passes decide nothing
        for _ in range(16):
            end = dict(head)
            self.block(body, end)
            joined = {g: _join(env.get(g, 0), end.get(g, 0)) for g in {*env, *end}}
            if all(joined[g] == head.get(g, 0) for g in joined):
                break
            head = joined
        else:  # pragma: no cover - values only move to None, so this settles in a few rounds
            head = {g: None for g in head}
        self.paying, self.stores = seen
        env.clear()
        env.update(head)
        return self.block(body, dict(head))


def _join(a: int | None, b: int | None) -> int | None:
    return a if a == b else None


def _vector_parts(e: ir.VecExpr) -> list[ir.VecExpr]:
    if isinstance(e, ir.VecBinary):
        return [e, *_vector_parts(e.a), *_vector_parts(e.b)]
    if isinstance(e, ir.VecCall):
        return [e, *(p for a in e.args for p in _vector_parts(a))]
    return [e]


def reads_vectors(k: ir.KernelIR) -> bool:
    """Whether the vectorised kernel ``k`` reads some input with a vector load."""
    return any(isinstance(p, ir.VecLoad)
               for s in ir.walk_stmts(k.body) if isinstance(s, ir.VecAssign | ir.VecStore)
               for p in _vector_parts(s.value))  # fmt: skip


__all__ = ["reads_vectors", "vector_width", "vectorize"]
