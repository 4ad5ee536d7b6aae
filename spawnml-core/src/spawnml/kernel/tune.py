"""Measured register tiles: the block each kernel runs fastest with on this device.

``SPAWNML_TUNE=1`` makes ``Backend.compile`` build a kernel once per candidate schedule (the
register tile :func:`~spawnml.kernel.tile.plan_tile` picks under budgets of 16, 8, 4 and 1
outputs per invocation), time each on the device with zero-filled inputs, and keep the
fastest. The choice is stored in the kernel disk cache under the device and the kernel's
key, so a device is measured once per kernel, across processes. Off (``0``, the default) the
budget is the backend's ``max_tile_outputs`` and nothing is measured: tests never tune.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ..errors import KernelCompileError
from .disk_cache import KernelDiskCache
from .ir import KernelIR
from .schedule import schedule

if TYPE_CHECKING:
    from ..backend import Backend

BUDGETS = (16, 8, 4, 1)
_RUNS = 3


def tuning_enabled() -> bool:
    """``SPAWNML_TUNE=1``: measure the candidate schedules (default ``0``: never)."""
    return os.environ.get("SPAWNML_TUNE", "0") == "1"


def candidates(backend: Backend, kernel: KernelIR) -> dict[tuple[int, ...], KernelIR]:
    """The distinct schedules of ``kernel`` within the backend's budget, by tile (() = none)."""
    out: dict[tuple[int, ...], KernelIR] = {}
    for budget in BUDGETS:
        if budget <= backend.max_tile_outputs:
            s = schedule(kernel, budget, backend.tile_interleave, backend.tile_inner,
                         backend.vector_loads_pay)
            out.setdefault(s.tile, s)
    return out


def _device(backend: Backend) -> str:
    info = backend.info
    return f"{backend.name}|{info.device}"


def _time(backend: Backend, program: Any, kernel: KernelIR) -> float:
    """Median seconds of one launch over zero-filled inputs (zeros are valid indices)."""
    import numpy as np

    inputs = [backend.upload(np.zeros(max(spec.size, 1), spec.dtype.numpy))
              for spec in kernel.inputs]
    nbytes = max(kernel.output.size, 1) * backend.storage_dtype(kernel.output.dtype).itemsize
    out = backend.alloc(nbytes)
    try:
        backend.launch(program, out, inputs)
        backend.synchronize()
        times = []
        for _ in range(_RUNS):
            start = time.perf_counter()
            backend.launch(program, out, inputs)
            backend.synchronize()
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]
    finally:
        backend.free(out)
        for b in inputs:
            backend.free(b)


def tune(backend: Backend, kernel: KernelIR) -> Any:
    """The program of ``kernel``'s fastest schedule on ``backend`` (measured once per device
    and kernel; the choice is cached on disk)."""
    variants = candidates(backend, kernel)
    cache = KernelDiskCache(backend.name, "tile")
    key = (_device(backend), kernel.key or kernel.fingerprint())
    chosen = cache.get(*key)
    if chosen is not None:
        tile = tuple(int(t) for t in chosen.decode().split("x") if t)
        if tile in variants:
            return backend.build_program(variants[tile])
    best: tuple[float, tuple[int, ...], Any] | None = None
    failure: KernelCompileError | None = None
    for tile, scheduled in variants.items():
        try:
            backend.check_limits(scheduled)
            program = backend.build_program(scheduled)
        except KernelCompileError as exc:
            failure = exc
            continue
        seconds = _time(backend, program, scheduled)
        if best is None or seconds < best[0]:
            best = (seconds, tile, program)
    if best is None:
        assert failure is not None
        raise failure
    cache.put("x".join(map(str, best[1])).encode(), *key)
    return best[2]
