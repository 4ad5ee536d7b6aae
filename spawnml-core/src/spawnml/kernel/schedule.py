"""The target-independent schedule between specialisation and lowering.

A specialised kernel computes one output per invocation. :func:`schedule` gives it the shape
a target runs: the register tile that buys reuse within the target's budget
(``spawnml.kernel.tile``), an interior version of each padded loop nest without its bounds
tests (``spawnml.kernel.interior``), float reductions split into interleaved partial results
where the target asks (``spawnml.kernel.partial_sums``), short innermost loops unrolled
(``spawnml.kernel.unroll``),
then the index tests its value ranges decide folded away (``spawnml.kernel.ranges``).
``Backend.compile`` calls it with the backend's budget; a compile-only check (CUDA's NVRTC
check) calls it with the same numbers, so what is checked is what would run.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import InvalidInputError
from .interior import version_interior
from .ir import KernelIR
from .partial_sums import split_reductions
from .ranges import fold_ranges
from .tile import register_tile, tile_budget, vector_tile
from .unroll import unroll_short_loops


def _switch(name: str) -> bool:
    """An on/off environment switch that defaults to on: ``name`` must be 0 or 1."""
    value = os.environ.get(name, "1")
    if value not in ("0", "1"):
        raise InvalidInputError(f"{name} must be 0 or 1, got {value!r}")
    return value == "1"


def interior_enabled() -> bool:
    """``SPAWNML_INTERIOR``: 1 (default) gives loop nests an interior version without the
    bounds tests that hold there (``spawnml.kernel.interior``), 0 not."""
    return _switch("SPAWNML_INTERIOR")


def partial_sums_enabled() -> bool:
    """``SPAWNML_PARTIAL_SUMS``: 1 (default) lets a target ask for float reductions as
    interleaved partial results (``spawnml.kernel.partial_sums``), 0 keeps every sum in order."""
    return _switch("SPAWNML_PARTIAL_SUMS")


def schedule(
    kernel: KernelIR,
    max_tile_outputs: int = 1,
    interleave: bool = False,
    tile_inner: int = 4,
    vectorizes: Callable[[KernelIR], bool] | None = None,
    reduction_lanes: int = 1,
) -> KernelIR:
    """``kernel`` tiled (up to ``max_tile_outputs`` outputs per invocation, ``tile_inner``
    along the innermost tiled axis; without reuse to buy, ``tile_inner`` along the innermost
    axis when ``vectorizes`` says the target makes vectors of it), given interior
    versions of its padded loop nests, its float reductions in ``reduction_lanes`` partial
    results (1: in order), its short innermost loops unrolled, and range-folded."""
    if max_tile_outputs > 1:
        tiled = register_tile(kernel, max_tile_outputs, interleave, tile_inner)
        if tiled is kernel and vectorizes is not None and not interleave:
            tiled = vector_tile(kernel, min(tile_inner, tile_budget(max_tile_outputs)),
                                vectorizes)
        kernel = tiled
    if interior_enabled():
        kernel = version_interior(kernel)
    if reduction_lanes > 1 and partial_sums_enabled():
        kernel = split_reductions(kernel, reduction_lanes)
    return fold_ranges(unroll_short_loops(kernel))
