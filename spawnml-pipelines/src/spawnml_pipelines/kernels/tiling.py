"""Tiled super-resolution: the tile grid, luma/chroma conversion (BT.601) and tile blending.

The grid covers an axis of length ``n`` with tiles of ``tile`` pixels at stride
``tile - overlap``; the last tile is shifted back to end exactly at the border, so every tile
is a real window of the image (no padding, whose values a model would see and smear).
Blending weights are zero-ish (``EPS``) within ``margin`` output pixels of a tile's inner
edges (where the model's zero padding makes its output wrong), ramp linearly to 1 across
the rest of the overlap, and are 1 on edges lying on the image border. Each output pixel is
the weighted mean of the tiles covering it, so with ``margin`` at least the model's receptive
radius, the tiled result equals the whole-image result up to float rounding.
"""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel

from .resample import source_coord, to_u8

EPS = 1e-6


@dataclass(frozen=True)
class TileGrid:
    """Tile origins along each axis (low-resolution pixels)."""

    tile_h: int
    tile_w: int
    stride_h: int
    stride_w: int
    oy: np.ndarray  # int32 origins along y
    ox: np.ndarray

    @property
    def count(self) -> int:
        return len(self.oy) * len(self.ox)


def axis_origins(n: int, tile: int, stride: int) -> np.ndarray:
    """Origins of the tiles covering [0, n): regular, the last one flush with the border."""
    if n <= tile:
        return np.zeros(1, np.int32)
    count = -(-(n - tile) // stride) + 1
    return np.minimum(np.arange(count) * stride, n - tile).astype(np.int32)


def tile_grid(height: int, width: int, tile_h: int, tile_w: int, overlap: int) -> TileGrid:
    """The grid of ``tile_h`` × ``tile_w`` tiles overlapping by ``overlap`` pixels."""
    if not 0 <= overlap < min(tile_h, tile_w):
        raise ValueError(f"overlap {overlap} must be in [0, {min(tile_h, tile_w)})")
    sh, sw = tile_h - overlap, tile_w - overlap
    return TileGrid(tile_h, tile_w, sh, sw, axis_origins(height, tile_h, sh),
                    axis_origins(width, tile_w, sw))


@kernel
def rgb_to_luma(img: Tensor, out: Output):
    """BT.601 luma of an RGB uint8 image, scaled to 0..1."""
    h, w = out.index
    r = cast(img[h, w, 0], f32)
    g = cast(img[h, w, 1], f32)
    b = cast(img[h, w, 2], f32)
    return (0.299 * r + 0.587 * g + 0.114 * b) * (1.0 / 255.0)


@kernel
def extract_tiles(y: Tensor, oy: Tensor, ox: Tensor, out: Output):
    """out[i, 0] = the tile at (oy[i // nx], ox[i % nx]) of the plane ``y`` (edges clamped
    when the plane is smaller than a tile)."""
    i, _c, r, col = out.index
    nx = ox.shape[0]
    yy = min(oy[i // nx] + r, y.shape[0] - 1)
    xx = min(ox[i % nx] + col, y.shape[1] - 1)
    return y[yy, xx]


@kernel
def place_tile(stack: Tensor, tile: Tensor, out: Output, index: int, first: bool):
    """A (T, C, H, W) stack whose slot ``index`` is ``tile`` (1, C, H, W) and whose other
    slots are ``stack``'s; ``first``: they are zeros and ``stack`` is not read."""
    per = out.shape[1] * out.shape[2] * out.shape[3]
    if out.flat // per == index:
        return tile.flat[out.flat % per]
    if first:
        return 0.0
    return stack.flat[out.flat]


@helper
def edge_weight(u, size, margin, ramp, first, last):
    """Blend weight at position ``u`` of a tile of ``size`` output pixels."""
    lo = min(max((cast(u - margin, f32) + 0.5) / ramp, EPS), 1.0)
    hi = min(max((cast(size - u - margin, f32) - 0.5) / ramp, EPS), 1.0)
    return (1.0 if first else lo) * (1.0 if last else hi)


@kernel
def blend_tiles(tiles: Tensor, oy: Tensor, ox: Tensor, out: Output, scale: int, stride_h: int,
                stride_w: int, margin: int, ramp: float):
    """The full-resolution plane from upscaled tiles (T, 1, scale*th, scale*tw): the weighted
    mean of the tiles covering each output pixel."""
    y, x = out.index
    ny = oy.shape[0]
    nx = ox.shape[0]
    th = tiles.shape[2]
    tw = tiles.shape[3]
    py = y // scale
    px = x // scale
    lo_y = max((py - th // scale) // stride_h + 1, 0)
    hi_y = min(py // stride_h + 1, ny - 1)
    lo_x = max((px - tw // scale) // stride_w + 1, 0)
    hi_x = min(px // stride_w + 1, nx - 1)
    acc = 0.0
    total = 0.0
    for ty in range(lo_y, hi_y + 1):
        u = y - oy[ty] * scale
        if 0 <= u < th:
            wy = edge_weight(u, th, margin, ramp, ty == 0, ty == ny - 1)
            for tx in range(lo_x, hi_x + 1):
                v = x - ox[tx] * scale
                if 0 <= v < tw:
                    wt = wy * edge_weight(v, tw, margin, ramp, tx == 0, tx == nx - 1)
                    acc = acc + wt * tiles[ty * nx + tx, 0, u, v]
                    total = total + wt
    return acc / total


@helper
def bilinear_hwc(img, fy, fx, c):
    iy = cast(floor(fy), i32)
    ix = cast(floor(fx), i32)
    iy1 = min(iy + 1, img.shape[0] - 1)
    ix1 = min(ix + 1, img.shape[1] - 1)
    wy = fy - floor(fy)
    wx = fx - floor(fx)
    a = cast(img[iy, ix, c], f32)
    b = cast(img[iy, ix1, c], f32)
    d = cast(img[iy1, ix, c], f32)
    e = cast(img[iy1, ix1, c], f32)
    top = a + (b - a) * wx
    return top + (d + (e - d) * wx - top) * wy


@kernel
def merge_luma_chroma(luma: Tensor, img: Tensor, out: Output):
    """RGB from a high-resolution luma plane (0..1) and the chroma (BT.601 Cb, Cr) of the
    low-resolution RGB image, upsampled bilinearly."""
    y, x, c = out.index
    sy = cast(img.shape[0], f32) / cast(out.shape[0], f32)
    sx = cast(img.shape[1], f32) / cast(out.shape[1], f32)
    fy = source_coord(y, 0.0, sy, img.shape[0])
    fx = source_coord(x, 0.0, sx, img.shape[1])
    r = bilinear_hwc(img, fy, fx, 0)
    g = bilinear_hwc(img, fy, fx, 1)
    b = bilinear_hwc(img, fy, fx, 2)
    cb = -0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 0.5 * r - 0.418688 * g - 0.081312 * b
    lum = luma[y, x] * 255.0
    if c == 0:
        return to_u8(lum + 1.402 * cr)
    elif c == 1:
        return to_u8(lum - 0.344136 * cb - 0.714136 * cr)
    return to_u8(lum + 1.772 * cb)
