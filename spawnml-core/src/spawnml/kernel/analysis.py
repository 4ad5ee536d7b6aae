"""Static facts about a kernel, shared by the passes, printers and limit checks."""

from __future__ import annotations

from . import ir
from .types import ScalarType


def strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major element strides of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return list(reversed(out))


def trip_count(start: int, stop: int, step: int) -> int:
    """Iterations of ``range(start, stop, step)``."""
    return max(0, -(-(stop - start) // step))


def nonneg(e: ir.Expr, known: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``e`` is evidently >= 0 (then C and Python integer division agree);
    ``known`` names variables known to be non-negative."""
    if isinstance(e, ir.Const):
        return e.value >= 0
    if isinstance(e, ir.GlobalIndex) or (isinstance(e, ir.Var) and e.name in known):
        return True
    if isinstance(e, ir.Binary) and e.op in (ir.Op.ADD, ir.Op.MUL, ir.Op.DIV, ir.Op.MOD):
        return nonneg(e.a, known) and nonneg(e.b, known)
    return False


def _bodies(k: ir.KernelIR) -> list[tuple[ir.Stmt, ...]]:
    return [k.body, *(f.body for f in k.functions)]


def uses_type(k: ir.KernelIR, t: ScalarType) -> bool:
    """Whether any value of the kernel or of its polyfill functions has type ``t``."""
    if any(v.type == t for v in k.locals):
        return True
    for f in k.functions:
        if f.ret == t or any(v.type == t for v in (*f.params, *f.locals)):
            return True
    return any(e.type == t for body in _bodies(k) for e in ir.all_exprs(body))


def calls(k: ir.KernelIR, fn: str) -> bool:
    """Whether the kernel or one of its polyfill functions calls intrinsic ``fn``."""
    return any(
        isinstance(e, ir.Call) and e.fn == fn for body in _bodies(k) for e in ir.all_exprs(body)
    )


def loop_iterations(body: tuple[ir.Stmt, ...]) -> int | None:
    """An upper bound on the loop iterations one invocation executes as Mesa's llvmpipe
    counts them; None when a bound depends on data.

    llvmpipe (lavapipe WebGPU, llvmpipe WebGL) stops a shader after 65,535 loop iterations
    per invocation without any error, so those backends refuse kernels above it. Its limiter
    counts every iteration of every loop, nested ones included, and each exit from a loop:
    1 plus the loop's depth of nested loops per entry (measured on the GLSL path: ``for i in
    range(n)`` around ``range(3)`` x ``range(3)`` stops after 65535 // 18 outer iterations;
    a ``range(40)`` inside one on lavapipe after 65535 // 42). Loops the driver unrolls
    cost less, so the bound stays an upper one.
    """
    return _loop_cost(body)[0]


def _loop_cost(body: tuple[ir.Stmt, ...]) -> tuple[int | None, int]:
    """(iterations of ``body`` with exits, the deepest loop nesting in it)."""
    total, depth = 0, 0
    for s in body:
        if isinstance(s, ir.For):
            if not (isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const)):
                return None, 0
            count = trip_count(int(s.start.value), int(s.stop.value), s.step)
            inner, below = _loop_cost(s.body)
            if inner is None:
                return None, 0
            total += count * (1 + inner) + 1 + below
            depth = max(depth, 1 + below)
        elif isinstance(s, ir.If):
            (then, d1), (orelse, d2) = _loop_cost(s.then), _loop_cost(s.orelse)
            if then is None or orelse is None:
                return None, 0
            total += max(then, orelse)
            depth = max(depth, d1, d2)
    return total, depth


UNKNOWN_TRIPS = 16  # loops whose bounds depend on data count as this many iterations


def work_estimate(body: tuple[ir.Stmt, ...]) -> int:
    """Statements one invocation executes, loops counted by their trips (bounds that depend
    on data by ``UNKNOWN_TRIPS``; both arms of a branch): a static measure of an
    invocation's work, for splitting launches across threads."""
    total = 0
    for s in body:
        if isinstance(s, ir.For):
            known = isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const)
            trips = (
                trip_count(int(s.start.value), int(s.stop.value), s.step)
                if known else UNKNOWN_TRIPS
            )
            total += 1 + trips * work_estimate(s.body)
        elif isinstance(s, ir.If):
            total += 1 + work_estimate(s.then) + work_estimate(s.orelse)
        else:
            total += 1
    return total


def check_loop_limit(backend: str, kernel: ir.KernelIR, limit: int | None) -> None:
    """Raise KernelCompileError when ``kernel`` provably exceeds a device's loop limit."""
    if limit is None:
        return
    bound = loop_iterations(kernel.body)
    if bound is not None and bound > limit:
        from ..errors import KernelCompileError

        raise KernelCompileError(
            f"{backend}: {kernel.name} ({kernel.source}) runs {bound} loop iterations per "
            f"output element; this device stops shaders after {limit} (Mesa llvmpipe's loop "
            "limiter), so it would return a wrong answer"
        )
