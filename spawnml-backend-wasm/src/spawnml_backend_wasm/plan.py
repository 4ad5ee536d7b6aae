"""A recorded plan's launches as one module: one host -> Wasm call per thread per inference.

``plan_module(launches, threads)`` links the launches' kernels (``link``) into one module
importing the shared memory, whose ``run(tid, nthreads, block)`` runs every launch in order.
A launch worth splitting (``Program.parts``) gives thread ``tid`` the same output range
``Runtime.run`` would; the others run on thread 0 alone. Threads meet at a barrier in shared
memory (an atomic counter and generation, ``memory.atomic.wait32``/``notify``) between two
launches unless both run on thread 0 alone: every pair of launches on different threads is
then ordered by a barrier, reads after writes and writes after reads alike.

The launch addresses are not in the module: they are i32 words of the block (after its
16-byte header: barrier count, barrier generation, abort flag), written by the host, so a
rebinding rewrites words and the compiled module is reused (it is cached by its text).
``abort(block)`` sets the abort flag and wakes every waiter: a thread that trapped cannot
leave the others waiting at a barrier; they return 1 from ``run`` at their next barrier.
"""

from __future__ import annotations

from collections.abc import Sequence

from .link import link
from .wat import WatKernel

HEADER = 16  # barrier count, barrier generation, abort flag, padding
SPIN = 4000  # barrier polls before a thread sleeps in memory.atomic.wait32

BARRIER = f"""  (func $barrier (param $at i32) (param $n i32) (result i32)
    (local $gen i32) (local $spin i32)
    (local.set $gen (i32.atomic.load offset=4 (local.get $at)))
    (if (i32.eq (i32.add (i32.atomic.rmw.add (local.get $at) (i32.const 1)) (i32.const 1))
                (local.get $n))
      (then
        (i32.atomic.store (local.get $at) (i32.const 0))
        (drop (i32.atomic.rmw.add offset=4 (local.get $at) (i32.const 1)))
        (drop (memory.atomic.notify offset=4 (local.get $at) (i32.const -1))))
      (else
        (block $done (loop $wait
          (br_if $done (i32.ne (i32.atomic.load offset=4 (local.get $at)) (local.get $gen)))
          (if (i32.atomic.load offset=8 (local.get $at)) (then (return (i32.const 1))))
          (local.set $spin (i32.add (local.get $spin) (i32.const 1)))
          (if (i32.gt_u (local.get $spin) (i32.const {SPIN})) (then
            (drop (memory.atomic.wait32 offset=4 (local.get $at) (local.get $gen)
                                        (i64.const 1000000)))))
          (br $wait)))))
    (i32.atomic.load offset=8 (local.get $at)))
  (func (export "abort") (param $at i32)
    (i32.atomic.store offset=8 (local.get $at) (i32.const 1))
    (drop (memory.atomic.notify offset=4 (local.get $at) (i32.const -1))))"""


def split_step(size: int, parts: int) -> int:
    """Elements per thread of a launch split in ``parts`` (``Runtime.run``'s split: whole
    multiples of 4 keep every chunk on the SIMD path)."""
    return (-(-size // parts) + 3) // 4 * 4


CHUNKS_PER_PART = 4
"""A thread calls its part of a split launch as this many consecutive ranges: a browser
optimises a Wasm function only for its later calls (no on-stack replacement), so one call
would run the first inference on baseline code."""


def _min(a: str, b: str) -> str:
    """The WAT of the smaller of two i32 expressions (the second one a constant or local)."""
    return f"(select {b} {a} (i32.gt_s {a} {b}))"


def sequence_body(
    launches: Sequence[tuple[int, int, int, Sequence[str]]], barrier_at: str, aborted: int = 1
) -> list[str]:
    """The body lines that run ``launches`` in order in a function with locals ``$tid``,
    ``$nthreads``, ``$lo`` and ``$hi``: each launch is (kernel index, invocations, parts,
    argument expressions; a thread calls its part in ``CHUNKS_PER_PART`` ranges); a
    barrier at address ``barrier_at`` separates two launches unless both run on thread 0
    alone, and a barrier that reports an abort returns ``aborted``."""
    body: list[str] = []
    previous = None
    for k, size, parts, args in launches:
        if previous is not None and (parts > 1 or previous > 1):
            body.append(f"    (if (call $barrier {barrier_at} (local.get $nthreads)) "
                        f"(then (return (i32.const {aborted}))))")  # fmt: skip
        operands = " ".join(args)
        if parts == 1:
            body.append(f"    (if (i32.eqz (local.get $tid)) (then (call $k{k} (i32.const 0) "
                        f"(i32.const {size}) {operands})))")  # fmt: skip
        else:
            step = split_step(size, parts)
            sub = split_step(step, CHUNKS_PER_PART)
            hi = _min(f"(i32.add (local.get $lo) (i32.const {step}))", f"(i32.const {size})")
            end = _min(f"(i32.add (local.get $lo) (i32.const {sub}))", "(local.get $hi)")
            body += [
                f"    (if (i32.lt_u (local.get $tid) (i32.const {parts})) (then",
                f"      (local.set $lo (i32.mul (local.get $tid) (i32.const {step})))",
                f"      (local.set $hi {hi})",
                "      (loop $chunk",
                f"        (call $k{k} (local.get $lo) {end} {operands})",
                f"        (local.set $lo (i32.add (local.get $lo) (i32.const {sub})))",
                "        (br_if $chunk (i32.lt_s (local.get $lo) (local.get $hi))))))",
            ]
        previous = parts
    return body


def plan_module(
    kernels: Sequence[WatKernel], launches: Sequence[tuple[int, int, int, int]]
) -> str:
    """The WAT of a plan module. ``launches``: (kernel index, invocations, parts, arguments)
    in order; each launch's arguments (output, then inputs) are the next words of the
    block."""
    spec = []
    word = HEADER
    for k, size, parts, nargs in launches:
        spec.append((k, size, parts, [f"(i32.load offset={word + 4 * j} (local.get $block))"
                                      for j in range(nargs)]))  # fmt: skip
        word += 4 * nargs
    return "\n".join([
        ";; spawnml wasm: a recorded plan in one module",
        "(module",
        '  (import "env" "memory" (memory 1 65536 shared))',
        *link(kernels),
        BARRIER,
        '  (func (export "run") (param $tid i32) (param $nthreads i32) (param $block i32) '
        "(result i32)",
        "    (local $lo i32) (local $hi i32)",
        *sequence_body(spec, "(local.get $block)"),
        "    (i32.const 0))",
        ")",
    ]) + "\n"
