"""Compose specialised kernels: the IR half of graph-level fusion.

Gather-style kernels compose by substitution. A *straight-line* kernel (assignments and one
final ``return``, no branches or loops) is a pure expression of its output index, so a
consumer may read the producer's expression instead of its buffer (``inline``: the producer
becomes a prologue of the consumer's reads). An elementwise consumer that reads a producer
only at its own output index can instead run inside the producer, on the value the producer
is about to store (``epilogue``). Either way one launch and one intermediate buffer go away.

The graph half (which nodes fuse, and when that is worth it) is ``spawnml.graph.fuse``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable

import numpy as np

from . import ir
from .rewrite import PatternMatcher, rewrite, rewrite_body
from .types import ScalarType

ExprFn = Callable[[ir.Expr], ir.Expr | None]


def map_expr(e: ir.Expr, fn: ExprFn) -> ir.Expr:
    """Rebuild ``e`` bottom-up; ``fn`` returns a replacement for a node (not revisited), or
    None to keep it. One pass of the core rewriter (``kernel.rewrite``)."""
    return rewrite(e, PatternMatcher([(ir.Expr, fn)], once=True))


def map_body(body: tuple[ir.Stmt, ...], fn: ExprFn) -> tuple[ir.Stmt, ...]:
    """Every expression of every statement of ``body`` rebuilt with ``map_expr``."""
    return rewrite_body(body, PatternMatcher([(ir.Expr, fn)], once=True))


def size_of(e: ir.Expr) -> int:
    """The number of distinct nodes of an expression (a subexpression used twice counts
    once, as a target compiler computes it once)."""
    seen: set[int] = set()
    distinct: set[ir.Expr] = set()
    for x in ir.walk_expr(e):
        if id(x) not in seen:
            seen.add(id(x))
            distinct.add(x)
    return len(distinct)


def body_size(body: tuple[ir.Stmt, ...]) -> int:
    return sum(1 for _ in ir.all_exprs(body))


# ----------------------------------------------------------------------------- analysis


def value_expr(k: ir.KernelIR) -> ir.Expr | None:
    """The output element of a straight-line kernel as one expression of ``GlobalIndex``
    and loads (its local variables substituted away); None when the body branches, loops
    or ends other than with one ``return``."""
    env: dict[str, ir.Expr] = {}

    def resolve(e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Var):
            return env.get(e.name, ir.Const(e.type, False if e.type == ScalarType.bool else 0))
        return None

    for n, s in enumerate(k.body):
        if isinstance(s, ir.Assign):
            env[s.var.name] = map_expr(s.value, resolve)
        elif isinstance(s, ir.Return) and n == len(k.body) - 1:
            return map_expr(s.value, resolve)
        else:
            return None
    return None


def loads_of(body: tuple[ir.Stmt, ...], buffer: int) -> list[ir.Load]:
    return [e for e in ir.all_exprs(body) if isinstance(e, ir.Load) and e.buffer == buffer]


def loads_in_loops(body: tuple[ir.Stmt, ...], buffer: int) -> bool:
    """Whether ``buffer`` is read inside a loop (so an inlined producer would be recomputed
    once per iteration)."""
    return any(isinstance(s, ir.For) and loads_of(s.body, buffer) for s in ir.walk_stmts(body))


def calls(e: ir.Expr) -> set[str]:
    return {x.fn for x in ir.walk_expr(e) if isinstance(x, ir.Call)}


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_INT_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _c_div,
    "mod": lambda a, b: a - _c_div(a, b) * b,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_INT_CALLS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "min": np.minimum, "max": np.maximum,
    "floordiv": lambda a, b: np.where(b == 0, 0, a // np.where(b == 0, 1, b)),
    "floormod": lambda a, b: np.where(b == 0, 0, a % np.where(b == 0, 1, b)),
}


class _NotIndexMath(Exception):
    pass


def _eval_index(e: ir.Expr, gid: np.ndarray) -> np.ndarray:
    """Evaluate integer index math of ``GlobalIndex`` exactly (int64, C semantics)."""
    if isinstance(e, ir.GlobalIndex):
        return gid
    if isinstance(e, ir.Const) and e.type in (ScalarType.i32, ScalarType.bool):
        return np.asarray(int(e.value), np.int64)
    if isinstance(e, ir.Binary) and e.op in _INT_BINARY and e.a.type == ScalarType.i32:
        a, b = _eval_index(e.a, gid), _eval_index(e.b, gid)
        if e.op in ("div", "mod") and np.any(b == 0):
            raise _NotIndexMath
        return _INT_BINARY[e.op](a, b)
    if isinstance(e, ir.Select):
        c = _eval_index(e.cond, gid)
        return np.where(c, _eval_index(e.a, gid), _eval_index(e.b, gid))
    if isinstance(e, ir.Call) and e.fn in _INT_CALLS and e.type == ScalarType.i32:
        return _INT_CALLS[e.fn](*(_eval_index(a, gid) for a in e.args))
    if isinstance(e, ir.Unary) and e.op == "neg" and e.type == ScalarType.i32:
        return -_eval_index(e.x, gid)
    raise _NotIndexMath


def is_identity_index(index: ir.Expr, size: int, chunk: int = 1 << 20) -> bool:
    """Whether ``index`` equals ``GlobalIndex`` for every invocation ``0 <= gid < size``,
    checked exactly by evaluating its integer math over every invocation."""
    if isinstance(index, ir.GlobalIndex):
        return True
    try:
        for start in range(0, size, chunk):
            gid = np.arange(start, min(size, start + chunk), dtype=np.int64)
            if not np.array_equal(np.broadcast_to(_eval_index(index, gid), gid.shape), gid):
                return False
    except _NotIndexMath:
        return False
    return True


# ----------------------------------------------------------------------------- composition


def _at(e: ir.Expr, gid: ir.Expr, buffers: Callable[[int], int]) -> ir.Expr:
    """``e`` evaluated at output index ``gid``, its loads renumbered by ``buffers``."""

    def fn(x: ir.Expr) -> ir.Expr | None:
        if isinstance(x, ir.GlobalIndex):
            return gid
        if isinstance(x, ir.Load):
            return dataclasses.replace(x, buffer=buffers(x.buffer))
        return None

    return map_expr(e, fn)


def _as_type(e: ir.Expr, t: ScalarType) -> ir.Expr:
    return e if e.type == t else ir.Cast(t, e)


def _unique_inputs(specs: list[ir.BufferSpec]) -> tuple[ir.BufferSpec, ...]:
    """The specs with distinct names (a repeated name gets the first free ``_<n>`` suffix)."""
    used = {s.name for s in specs}
    seen: set[str] = set()
    out = []
    for s in specs:
        name, n = s.name, 1
        while name in seen or (name != s.name and name in used):
            name, n = f"{s.name}_{n}", n + 1
        seen.add(name)
        out.append(dataclasses.replace(s, name=name))
    return tuple(out)


_NOT_IDENT = re.compile(r"\W+")


def fused_name(parts: list[str]) -> str:
    """An identifier naming the fused nodes (long lists end in a short hash)."""
    name = "__".join(p for p in (_NOT_IDENT.sub("_", x).strip("_") for x in parts) if p)
    name = name or "fused"
    if not name[0].isalpha():
        name = "f_" + name
    if len(name) > 60:
        name = name[:48].rstrip("_") + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def _finish(k: ir.KernelIR, name: str) -> ir.KernelIR:
    k = dataclasses.replace(k, name=name)
    return dataclasses.replace(k, key=f"{name}-{k.fingerprint()}")


def inline(consumer: ir.KernelIR, buffer: int, producer: ir.KernelIR, name: str) -> ir.KernelIR:
    """``consumer`` with its reads of input ``buffer`` replaced by ``producer``'s value at
    the read index. Inputs: the consumer's others in order, then the producer's."""
    value = value_expr(producer)
    if value is None:
        raise ValueError(f"{producer.name} is not straight-line")
    load_type = consumer.inputs[buffer].type
    base = len(consumer.inputs) - 1

    def fn(x: ir.Expr) -> ir.Expr | None:
        if isinstance(x, ir.Load):
            if x.buffer == buffer:
                return _as_type(_at(value, x.index, lambda b: base + b), load_type)
            if x.buffer > buffer:
                return dataclasses.replace(x, buffer=x.buffer - 1)
        return None

    body = map_body(consumer.body, fn)
    inputs = [*consumer.inputs[:buffer], *consumer.inputs[buffer + 1:], *producer.inputs]
    source = f"{consumer.source} <- {producer.source}"
    k = dataclasses.replace(consumer, inputs=_unique_inputs(inputs), body=body, source=source)
    return _finish(k, name)


def epilogue(producer: ir.KernelIR, consumer: ir.KernelIR, buffer: int, name: str) -> ir.KernelIR:
    """``producer`` computing ``consumer``'s element from the value it would store; the
    consumer must read input ``buffer`` (the producer's output) only at its own output
    index and have as many elements. Inputs: the producer's, then the consumer's others."""
    value = value_expr(consumer)
    if value is None:
        raise ValueError(f"{consumer.name} is not straight-line")
    if consumer.size != producer.size:
        raise ValueError("an epilogue needs as many outputs as its producer")
    held = ir.Var(consumer.inputs[buffer].type, f"ep{len(producer.locals)}_{consumer.name}")
    base = len(producer.inputs)

    def renumber(b: int) -> int:
        return base + (b if b < buffer else b - 1)

    def fn(x: ir.Expr) -> ir.Expr | None:
        if isinstance(x, ir.Load):
            if x.buffer == buffer:
                return held
            return dataclasses.replace(x, buffer=renumber(x.buffer))
        return None

    finish = map_expr(value, fn)

    def rewrite(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.Return):
                out.append(ir.Assign(s.line, held, _as_type(s.value, held.type)))
                out.append(ir.Return(s.line, finish))
            elif isinstance(s, ir.If):
                out.append(dataclasses.replace(s, then=rewrite(s.then), orelse=rewrite(s.orelse)))
            elif isinstance(s, ir.For):
                out.append(dataclasses.replace(s, body=rewrite(s.body)))
            else:
                out.append(s)
        return tuple(out)

    inputs = [*producer.inputs, *consumer.inputs[:buffer], *consumer.inputs[buffer + 1:]]
    k = dataclasses.replace(
        producer,
        inputs=_unique_inputs(inputs),
        # the consumer's element type in the producer's shape: the producer's index math
        # decomposes its own output shape (the sizes are equal, views may differ in shape)
        output=dataclasses.replace(consumer.output, shape=producer.output.shape),
        locals=(*producer.locals, held),
        body=rewrite(producer.body),
        source=f"{producer.source} -> {consumer.source}",
    )
    return _finish(k, name)


def _gid_only(e: ir.Expr) -> bool:
    return not any(isinstance(x, ir.Var | ir.Load) for x in ir.walk_expr(e))


def simplify_identity_reads(k: ir.KernelIR) -> ir.KernelIR:
    """``k`` with every read whose index math provably equals the output index (e.g. a
    broadcast offset between equal shapes, composed through fusion) reading at
    ``GlobalIndex`` directly, so the target does no division or modulo for it."""
    checked: dict[ir.Expr, bool] = {}

    def fn(x: ir.Expr) -> ir.Expr | None:
        if isinstance(x, ir.Load) and not isinstance(x.index, ir.GlobalIndex):
            if _gid_only(x.index):
                if x.index not in checked:
                    checked[x.index] = is_identity_index(x.index, k.size)
                if checked[x.index]:
                    return dataclasses.replace(x, index=ir.GlobalIndex(ScalarType.i32))
        return None

    body = map_body(k.body, fn)
    return k if body == k.body else _finish(dataclasses.replace(k, body=body), k.name)


def merge_inputs(k: ir.KernelIR, same: list[int]) -> ir.KernelIR:
    """``k`` with inputs that read the same buffer merged: ``same[i]`` is the number of
    the first input equal to input ``i`` (``same[i] == i`` for a first occurrence)."""
    keep = sorted(set(same))
    if len(keep) == len(k.inputs):
        return k
    number = {old: new for new, old in enumerate(keep)}

    def fn(x: ir.Expr) -> ir.Expr | None:
        if isinstance(x, ir.Load):
            return dataclasses.replace(x, buffer=number[same[x.buffer]])
        return None

    merged = dataclasses.replace(
        k, inputs=tuple(k.inputs[i] for i in keep), body=map_body(k.body, fn)
    )
    return _finish(merged, k.name)
