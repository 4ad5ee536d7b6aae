"""Tap loops over a flat, phase-split padded input (2-D windows).

A depthwise conv or a pool combines, for every output, the input elements under each kernel
tap. Slicing the padded (N, C, H, W) input per tap gives strided views whose inner rows are
only W/stride long, so numpy spends its time stepping rows. Here the padded input is split
into ``stride_y * stride_x`` phases (``xp[py::sy, px::sx]``), each stored as rows of one
common width ``PW``; then every tap reads *one contiguous slice* of length ``Ho * PW`` of one
phase, and the result is computed on that (N, C, Ho * PW) grid. The ``PW - Wo`` columns past
each output row are junk and :meth:`FlatTaps.crop` drops them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .fast_window import Window, scratch


@dataclass(frozen=True)
class FlatTaps:
    """The phases of one padded input and the geometry to read them tap by tap."""

    phases: np.ndarray  # (sy * sx, N, C, PH * PW)
    width: int  # PW, the row length of every phase
    win: Window

    @property
    def length(self) -> int:
        """Grid elements per (n, c): output rows times the phase width."""
        return self.win.out[0] * self.width

    def taps(self) -> Iterator[np.ndarray]:
        """For each tap in ``win.taps`` order, the (N, C, length) slice it reads."""
        (sy, sx), (dy, dx) = self.win.strides, self.win.dilations
        for ky, kx in self.win.taps:
            phase = (ky * dy) % sy * sx + (kx * dx) % sx
            start = (ky * dy) // sy * self.width + (kx * dx) // sx
            yield self.phases[phase, :, :, start : start + self.length]

    def tap_blocks(self) -> Iterator[tuple[slice, slice, np.ndarray]]:
        """The taps grouped by the phase they read: ``(ky, kx, view)`` where ``view`` is the
        (N, C, len(ky), len(kx), length) block of slices of the taps ``ky`` x ``kx`` (slices
        of the kernel axes), so that one copy moves a whole group (1 for stride 1, 4 for 2)."""
        (sy, sx), (dy, dx), (kh, kw) = self.win.strides, self.win.dilations, self.win.kernel
        item = self.phases.itemsize
        for py in range(sy):
            kys = [k for k in range(kh) if k * dy % sy == py]
            for px in range(sx):
                kxs = [k for k in range(kw) if k * dx % sx == px]
                if not kys or not kxs:
                    continue
                phase = self.phases[py * sx + px]
                start = kys[0] * dy // sy * self.width + kxs[0] * dx // sx
                ky_step = kys[1] - kys[0] if len(kys) > 1 else 1
                kx_step = kxs[1] - kxs[0] if len(kxs) > 1 else 1
                view = as_strided(
                    phase[..., start:],
                    shape=(*phase.shape[:2], len(kys), len(kxs), self.length),
                    strides=(
                        *phase.strides[:2],
                        ky_step * dy // sy * self.width * item,
                        kx_step * dx // sx * item,
                        item,
                    ),
                    writeable=False,
                )
                yield slice(kys[0], kys[-1] + 1, ky_step), slice(kxs[0], kxs[-1] + 1, kx_step), view

    def grid(self, slot: str) -> np.ndarray:
        """A scratch (N, C, length) array for results on the grid."""
        n, c = self.phases.shape[1:3]
        return scratch(slot, (n, c, self.length), self.phases.dtype)

    def crop(self, grid: np.ndarray) -> np.ndarray:
        """The (N, C, Ho, Wo) view of a grid result (junk columns dropped)."""
        n, c = grid.shape[:2]
        ho, wo = self.win.out
        return grid.reshape(n, c, ho, self.width)[..., :wo]


def flat_taps(x: np.ndarray, win: Window, fill: float) -> FlatTaps:
    """Split ``x`` (N, C, H, W) padded with ``fill`` into phases."""
    if x.ndim != 4:
        raise ValueError(f"flat taps need a 2-D window over (N, C, H, W), got shape {x.shape}")
    n, c, h, w = x.shape
    (sy, sx), dy, ky = win.strides, win.dilations[0], win.kernel[0]
    (by, bx), ho = win.begin, win.out[0]
    padded_w = w + bx + win.end[1] + win.extra[1]
    width = -(-padded_w // sx)
    rows = ho + (ky - 1) * dy // sy + 1  # +1: the last taps' slices run past the final row
    phases = scratch("phases", (sy * sx, n, c, rows, width), x.dtype)
    for py in range(sy):
        iy0 = (py - by) % sy  # first input row landing in this phase row set
        r0 = (iy0 + by) // sy
        count = max(0, min(len(range(iy0, h, sy)), rows - r0))
        for px in range(sx):
            ix0 = (px - bx) % sx
            c0 = (ix0 + bx) // sx
            cols = len(range(ix0, w, sx))
            phase = phases[py * sx + px]
            _fill_border(phase, r0, count, c0, cols, fill)
            if count and cols:
                src = x[:, :, iy0 : iy0 + sy * count : sy, ix0 : ix0 + sx * cols : sx]
                phase[:, :, r0 : r0 + count, c0 : c0 + cols] = src
    return FlatTaps(phases.reshape(sy * sx, n, c, rows * width), width, win)


def _fill_border(phase: np.ndarray, r0: int, rows: int, c0: int, cols: int, fill: float) -> None:
    """Set everything outside ``phase[..., r0:r0+rows, c0:c0+cols]`` (the input) to ``fill``."""
    if not rows or not cols:
        phase[...] = fill
        return
    phase[..., :r0, :] = fill
    phase[..., r0 + rows :, :] = fill
    phase[..., r0 : r0 + rows, :c0] = fill
    phase[..., r0 : r0 + rows, c0 + cols :] = fill
