"""numpy twins of the pixel kernels: the truth the kernel tests compare against."""

from __future__ import annotations

import numpy as np

from .colormap import colormap_coefficients
from .tiling import EPS, TileGrid


def to_u8(v: np.ndarray) -> np.ndarray:
    return np.clip(np.round(v), 0, 255).astype(np.uint8)


def _coords(n_out: int, n_in: int, offset: float = 0.0, scale: float | None = None):
    scale = n_in / n_out if scale is None else scale
    s = np.clip(offset + (np.arange(n_out, dtype=np.float64) + 0.5) * scale - 0.5, 0, n_in - 1)
    i0 = np.floor(s).astype(np.int64)
    return i0, np.minimum(i0 + 1, n_in - 1), (s - i0)


def bilinear_hwc(img: np.ndarray, oh: int, ow: int, box: tuple[float, float, float, float]
                 | None = None) -> np.ndarray:
    """(oh, ow, C) float64 bilinear sample of the box (y0, x0, h, w) of an HWC image."""
    h, w = img.shape[:2]
    y0, x0, bh, bw = box if box is not None else (0.0, 0.0, h, w)
    y_0, y_1, wy = _coords(oh, h, y0, bh / oh)
    x_0, x_1, wx = _coords(ow, w, x0, bw / ow)
    f = img.astype(np.float64)
    wx = wx[None, :, None]
    top = f[y_0][:, x_0] + (f[y_0][:, x_1] - f[y_0][:, x_0]) * wx
    bottom = f[y_1][:, x_0] + (f[y_1][:, x_1] - f[y_1][:, x_0]) * wx
    return top + (bottom - top) * wy[:, None, None]


def resize_hwc_to_nchw(img: np.ndarray, oh: int, ow: int,
                       box: tuple[float, float, float, float] | None = None) -> np.ndarray:
    return bilinear_hwc(img, oh, ow, box).transpose(2, 0, 1)[None].astype(np.float32)


def resize_planes(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    lead = x.shape[:-2]
    planes = x.reshape(-1, *x.shape[-2:]).transpose(1, 2, 0)
    out = bilinear_hwc(planes, oh, ow).transpose(2, 0, 1)
    return out.reshape(*lead, oh, ow).astype(np.float32)


def normalize_nchw(x: np.ndarray, mean, std, scale: float) -> np.ndarray:
    m = np.asarray(mean, np.float32)[None, :, None, None]
    s = np.asarray(std, np.float32)[None, :, None, None]
    return ((x * np.float32(scale) - m) / s).astype(np.float32)


def nchw_to_hwc_u8(x: np.ndarray, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    return to_u8(x[0].transpose(1, 2, 0).astype(np.float64) * scale + offset)


def colormap(x: np.ndarray, name: str) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    t = (x.astype(np.float64) - lo) / (hi - lo) if hi > lo else np.zeros_like(x, np.float64)
    c = colormap_coefficients(name).astype(np.float64)
    v = np.zeros((*x.shape, 3))
    for k in range(6, -1, -1):
        v = v * t[..., None] + c[:, k]
    return to_u8(np.clip(v, 0, 1) * 255)


def gaussian_blur(img: np.ndarray, radius: int, sigma: float) -> np.ndarray:
    k = np.arange(-radius, radius + 1)
    wt = np.exp(-0.5 * k * k / sigma**2)
    wt /= wt.sum()
    f = img.astype(np.float64)
    h, w = f.shape[:2]
    rows = sum(wt[i] * f[np.clip(np.arange(h) + k[i], 0, h - 1)] for i in range(len(k)))
    return sum(wt[i] * rows[:, np.clip(np.arange(w) + k[i], 0, w - 1)] for i in range(len(k)))


def alpha_to_rgba(img: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.concatenate([img, to_u8(alpha * 255.0)[..., None]], axis=2)


def composite_over(img: np.ndarray, alpha: np.ndarray, background: np.ndarray) -> np.ndarray:
    a = np.clip(alpha, 0, 1)[..., None].astype(np.float64)
    return to_u8(img * a + np.broadcast_to(background, img.shape) * (1 - a))


def rgb_to_luma(img: np.ndarray) -> np.ndarray:
    f = img.astype(np.float64)
    return ((0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]) / 255).astype(np.float32)


def _axis_weights(n: int, origins: np.ndarray, size: int, scale: int, margin: int, ramp: float):
    """(tiles, n) weights of each tile along one output axis (0 where it does not cover)."""
    out = np.zeros((len(origins), n))
    for i, o in enumerate(origins):
        u = np.arange(size)
        lo = np.clip((u - margin + 0.5) / ramp, EPS, 1.0)
        hi = np.clip((size - u - margin - 0.5) / ramp, EPS, 1.0)
        wt = (1.0 if i == 0 else lo) * (1.0 if i == len(origins) - 1 else hi) * np.ones(size)
        seg = out[i, o * scale : o * scale + size]
        seg[:] = wt[: len(seg)]
    return out


def blend_tiles(tiles: np.ndarray, grid: TileGrid, out_h: int, out_w: int, scale: int,
                margin: int, ramp: float) -> np.ndarray:
    th, tw = tiles.shape[2:]
    wy = _axis_weights(out_h, grid.oy, th, scale, margin, ramp)
    wx = _axis_weights(out_w, grid.ox, tw, scale, margin, ramp)
    acc = np.zeros((out_h, out_w))
    total = np.zeros((out_h, out_w))
    for ty, oy in enumerate(grid.oy):
        for tx, ox in enumerate(grid.ox):
            hh, ww = min(th, out_h - oy * scale), min(tw, out_w - ox * scale)
            wt = np.outer(wy[ty, oy * scale : oy * scale + hh],
                          wx[tx, ox * scale : ox * scale + ww])
            sl = np.s_[oy * scale : oy * scale + hh, ox * scale : ox * scale + ww]
            acc[sl] += wt * tiles[ty * len(grid.ox) + tx, 0, :hh, :ww]
            total[sl] += wt
    return (acc / total).astype(np.float32)


def merge_luma_chroma(luma: np.ndarray, img: np.ndarray) -> np.ndarray:
    up = bilinear_hwc(img, *luma.shape)
    r, g, b = up[..., 0], up[..., 1], up[..., 2]
    cb = -0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 0.5 * r - 0.418688 * g - 0.081312 * b
    y = luma.astype(np.float64) * 255
    return to_u8(np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb], -1))
