"""Backend kernel or portable lowering, chosen per node shape by measurement.

A backend may hold hand-written kernels for an op (the cpu's BLAS convolution) beside the
portable lowering compiled from the kernel language. Which is faster depends on the shape:
on the cpu with native code, BLAS wins a ResNet-50 3x3 convolution by 2-3x and loses a
depthwise one by 4-7x. A backend opts in with ``Backend.kernel_choice_key`` (what the
timings depend on: device, threads, compiler); planning then times both on the node's shapes
(random inputs, the node's known constants) and keeps the faster. Decisions are kept in
memory and in spawnml's disk cache, so a shape is measured once per machine.

``SPAWNML_KERNEL_CHOICE``: ``kernel`` (default: always the backend kernel) or ``measure``.
Measuring is still opt-in. Its one known mismatch is fixed: a Ray batch of remove-bg
differed from one process only when the Ray Data actors measured, because measuring in an
actor's ``__init__`` made its main thread threadpoolctl's only thread allowed to set
OpenBLAS's thread count, so the ``__call__`` thread's BLAS ran at Ray's
``OMP_NUM_THREADS=1`` (``spawnml_backend_cpu.blas_threads`` now sets it from any thread).
The default stays ``kernel`` until the whole test suite has run with measuring on.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backend import Backend
from ..errors import InvalidInputError
from ..kernel.disk_cache import KernelDiskCache
from ..op import BackendKernel, Node, OpDef, TensorInfo
from ..tensor import DeviceTensor

ENV = "SPAWNML_KERNEL_CHOICE"
MIN_ELEMENTS = 16384
"""Below this many elements read and written both sides take microseconds: the kernel is
kept unmeasured (measuring would cost more than any difference). Inputs count: a GEMV's
work is its weight matrix, not its one output row."""
MARGIN = 0.9
"""The portable lowering must take under this fraction of the kernel's time to be chosen, so
timing noise does not flip a decision between near-equals."""
RUNS = 5
BUDGET_S = 0.2
"""Timed rounds stop at ``RUNS`` or at about this much time per node, so planning a large
model measures for seconds, not minutes (a round of a 1024x1024 convolution is ~0.1 s)."""
_DECISIONS: dict[str, bool] = {}


def mode() -> str:
    value = os.environ.get(ENV, "kernel")
    if value not in ("measure", "kernel"):
        raise InvalidInputError(f"{ENV} must be 'measure' or 'kernel', got {value!r}")
    return value


def portable_preferred(
    backend: Backend,
    kernel: BackendKernel,
    op: OpDef,
    node: Node,
    inputs: Sequence[TensorInfo | None],
    outputs: Sequence[TensorInfo],
    values: Sequence[np.ndarray | None],
) -> bool:
    """Whether ``node`` runs faster through the portable lowering than through ``kernel``
    on ``backend`` (which ``kernel.supports``); False where the backend does not measure."""
    context = backend.kernel_choice_key()
    if context is None or mode() == "kernel":
        return False
    touched = [i for i in [*inputs, *outputs] if i is not None and i.is_static]
    if sum(i.size for i in touched) < MIN_ELEMENTS:
        return False
    if any(i is not None and not i.dtype.is_float and (n >= len(values) or values[n] is None)
           for n, i in enumerate(inputs)):
        return False  # indices, lengths, masks: their values decide the work, not their shape
    key = _key(context, kernel, node, inputs, outputs, values)
    found = _DECISIONS.get(key)
    if found is None:
        disk = KernelDiskCache("choices", "txt")
        stored = disk.get(key)
        if stored not in (b"portable", b"kernel"):
            measured = _measure(backend, kernel, op, node, inputs, outputs, values)
            # the first decision stored wins: processes that measured at the same time
            # (Ray actors, workers) run the same kernels and compute bit-identical results
            stored = disk.put_first(b"portable" if measured else b"kernel", key)
        found = _DECISIONS[key] = stored == b"portable"
    return found


def _key(context: str, kernel: BackendKernel, node: Node, inputs: Sequence[TensorInfo | None],
         outputs: Sequence[TensorInfo], values: Sequence[np.ndarray | None]) -> str:
    attrs = sorted((k, repr(v)) for k, v in node.attrs.items())
    known = [n < len(values) and values[n] is not None for n in range(len(inputs))]

    def batchless(info: TensorInfo) -> tuple:
        """The shape with its batch dimension left out: one decision serves every batch
        size, so a batch of images computes each image with the same kernels (and bits)
        as the image alone."""
        shape = tuple(info.shape or ())
        return (str(info.dtype), shape[1:] if shape else shape)

    text = repr((context, type(kernel).__qualname__, node.domain, node.op_type, attrs,
                 [None if i is None else (i.shape, str(i.dtype)) if known[n] else batchless(i)
                  for n, i in enumerate(inputs)],
                 [batchless(o) for o in outputs], known))
    return hashlib.sha256(text.encode()).hexdigest()


def _measure(backend: Backend, kernel: BackendKernel, op: OpDef, node: Node,
             inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo],
             values: Sequence[np.ndarray | None]) -> bool:
    from ..execute import PreparedLowering

    rng = np.random.default_rng(0)
    made: list[DeviceTensor] = []

    def tensor(info: TensorInfo, value: np.ndarray | None) -> DeviceTensor:
        if value is None:  # only float inputs are made up (see portable_preferred)
            value = rng.standard_normal(info.shape).astype(info.dtype.numpy)
        made.append(DeviceTensor.from_numpy(backend, value))
        return made[-1]

    try:
        ins = [None if i is None else tensor(i, values[n] if n < len(values) else None)
               for n, i in enumerate(inputs)]
        outs = [DeviceTensor.empty(backend, o.shape, o.dtype) for o in outputs]
        made += outs
        fast = kernel.prepare(backend, node, inputs, outputs, values)
        portable = PreparedLowering(backend, op.lower(node, inputs, outputs, values), inputs,
                                    outputs)
        kernel_s, portable_s = _best(backend, [lambda: fast(ins, outs),
                                               lambda: portable.run(ins, outs)])
    except Exception:  # noqa: BLE001 - either side may refuse made-up inputs: keep the kernel
        return False
    finally:
        for t in made:
            t.close()
    return portable_s < MARGIN * kernel_s


def _best(backend: Backend, runs: Sequence[Callable[[], Any]]) -> list[float]:
    """The best time of each of ``runs``, timed in alternation (load drift hits all alike):
    up to ``RUNS`` rounds, fewer where one round takes long (``BUDGET_S`` per node)."""
    best = [float("inf")] * len(runs)
    rounds = 1  # the first round warms up (first touch of memory, lazily built plans)
    done = 0
    while done <= rounds:
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            backend.synchronize()
            if done:
                best[i] = min(best[i], time.perf_counter() - start)
            else:
                best[i] = time.perf_counter() - start
        if not done:
            rounds = max(1, min(RUNS, int(BUDGET_S / max(sum(best), 1e-9))))
            best = [float("inf")] * len(runs)
        done += 1
    return best
