"""The target-independent schedule between specialisation and lowering.

A specialised kernel computes one output per invocation. :func:`schedule` gives it the shape
a target runs: the register tile that buys reuse within the target's budget
(``spawnml.kernel.tile``), then the index tests its value ranges decide folded away
(``spawnml.kernel.ranges``). ``Backend.compile`` calls it with the backend's budget; a
compile-only check (CUDA's NVRTC check) calls it with the same numbers, so what is checked
is what would run.
"""

from __future__ import annotations

from .ir import KernelIR
from .ranges import fold_ranges
from .tile import register_tile


def schedule(kernel: KernelIR, max_tile_outputs: int = 1, interleave: bool = False) -> KernelIR:
    """``kernel`` tiled (up to ``max_tile_outputs`` outputs per invocation) and range-folded."""
    if max_tile_outputs > 1:
        kernel = register_tile(kernel, max_tile_outputs, interleave)
    return fold_ranges(kernel)
