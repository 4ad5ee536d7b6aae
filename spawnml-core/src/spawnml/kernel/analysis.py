"""Static facts about a specialised kernel that backends check against device limits."""

from __future__ import annotations

from . import ir


def loop_iterations(body: tuple[ir.Stmt, ...]) -> int | None:
    """An upper bound on the loop iterations one invocation executes, counting every
    iteration of every loop (nested ones included); None when a bound depends on data.

    Mesa's llvmpipe (lavapipe WebGPU, llvmpipe WebGL) stops a shader after 65,535 loop
    iterations per invocation without any error, so those backends refuse kernels above it.
    """
    total = 0
    for s in body:
        if isinstance(s, ir.For):
            if not (isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const)):
                return None
            count = max(0, -(-(s.stop.value - s.start.value) // s.step))
            inner = loop_iterations(s.body)
            if inner is None:
                return None
            total += count * (1 + inner)
        elif isinstance(s, ir.If):
            then, orelse = loop_iterations(s.then), loop_iterations(s.orelse)
            if then is None or orelse is None:
                return None
            total += max(then, orelse)
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
