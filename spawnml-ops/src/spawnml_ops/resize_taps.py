"""Resize as separable 1-D passes: per axis, each output position reads a few input
positions ("taps") with weights. The host computes taps and weights once per shape (every
coordinate_transformation_mode, nearest_mode, linear/cubic, exclude_outside, antialias),
and one generic kernel applies them on the device; the numpy reference applies the same
ONNX-defined taps in float64."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class ResizeParams:
    mode: str  # nearest, linear, cubic
    coord: str
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0


def source_coords(p: ResizeParams, n_out: int, n_in: int, scale: float,
                  roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Input coordinates of each output position, and where tf_crop_and_resize extrapolates.

    As in onnx.reference, the "resized length" of the formulas is ``scale * n_in`` (not
    rounded) when it enters them."""
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    outside = np.zeros(n_out, bool)
    c = p.coord
    if c == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif c == "half_pixel_symmetric":
        adjust = n_out / (scale * n_in)
        x = (n_in / 2) * (1 - adjust) + (y + 0.5) / scale - 0.5
    elif c == "pytorch_half_pixel":
        x = (y + 0.5) / scale - 0.5 if length != 1 else np.full(n_out, -0.5)
    elif c == "align_corners":
        x = y * (n_in - 1) / (length - 1) if length != 1 else np.zeros(n_out)
    elif c == "asymmetric":
        x = y / scale
    elif c == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    else:  # tf_crop_and_resize
        start, end = roi if roi is not None else (0.0, 1.0)
        if length != 1:
            x = start * (n_in - 1) + y * (end - start) * (n_in - 1) / (length - 1)
        else:
            x = np.full(n_out, (start + end) * (n_in - 1) / 2)
        outside = (x < 0) | (x > n_in - 1)
    return x, outside


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel (Keys) at distances ``t``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def weights(p: ResizeParams, ratio: np.ndarray, scale: float) -> np.ndarray:
    """[n_out, taps] weights over consecutive input positions starting at the window start.

    ``ratio`` is in (0, 1]: the distance past the input position left of the coordinate."""
    if p.mode == "nearest":
        r = ratio
        if p.nearest == "round_prefer_floor":
            right = r > 0.5
        elif p.nearest == "round_prefer_ceil":
            right = r >= 0.5
        elif p.nearest == "floor":
            right = np.zeros_like(r, bool)
        else:
            right = np.ones_like(r, bool)
        right = right | (r == 1.0)
        return np.stack([~right, right], axis=1).astype(np.float64)
    s = min(scale, 1.0) if p.antialias else 1.0
    if p.mode == "linear":
        start = int(math.floor(-1 / s) + 1) if p.antialias else 0
        offsets = np.arange(start, 2 - start) if p.antialias else np.arange(0, 2)
        d = (offsets[None, :] - ratio[:, None]) * s
        w = np.clip(1 - np.abs(d), 0, 1)
    else:
        start = int(math.floor(-2 / s) + 1) if p.antialias else -1
        offsets = np.arange(start, 2 - start) if p.antialias else np.arange(-1, 3)
        d = (offsets[None, :] - ratio[:, None]) * s
        w = _cubic(d, p.cubic_a)
    if p.antialias:
        w = w / w.sum(axis=1, keepdims=True)
    return w


def axis_taps(p: ResizeParams, n_in: int, n_out: int, scale: float,
              roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices [n_out, taps] int32 clamped into the input, weights float64, extrapolate)."""
    x, outside = source_coords(p, n_out, n_in, scale, roi)
    left = np.floor(x)
    ratio = np.where(x == left, 1.0, x - left)
    w = weights(p, ratio, scale)
    taps = w.shape[1]
    # the window of ``taps`` nearest positions, ties to the left: it starts at the
    # position left of x (ratio in (0, 1]) minus (taps // 2 - 1)
    first = (left - np.where(x == left, 1, 0)).astype(np.int64) - (taps // 2 - 1)
    idx = first[:, None] + np.arange(taps)[None, :]
    if p.exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, max(n_in - 1, 0)).astype(np.int32), w, outside


def apply_axis(x: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray, outside: np.ndarray,
               extrapolation: float) -> np.ndarray:
    """The numpy form of one pass (float64)."""
    gathered = np.take(x, idx, axis=axis)  # axis -> (n_out, taps)
    shape = (1,) * axis + w.shape + (1,) * (x.ndim - axis - 1)
    y = (gathered * w.reshape(shape)).sum(axis=axis + 1)
    mask = outside.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
    return np.where(mask, extrapolation, y)


def is_identity(idx: np.ndarray, w: np.ndarray, outside: np.ndarray, n_in: int) -> bool:
    """Whether a pass would copy its input unchanged (skip it)."""
    if idx.shape[0] != n_in or outside.any():
        return False
    pos = np.arange(n_in)[:, None]
    return bool(np.allclose(np.where(idx == pos, w, 0).sum(axis=1), 1.0)
                and np.allclose(np.where(idx == pos, 0, w), 0.0))
