"""Resampling and layout kernels: bilinear resize, HWC <-> NCHW, normalisation, u8 output."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel


@helper
def to_u8(v):
    """Round half to even and clamp to 0..255 (the value stored into a uint8 output)."""
    return cast(min(max(round(v), 0.0), 255.0), i32)


@helper
def source_coord(o, offset, scale, n):
    """Half-pixel source coordinate of output coordinate ``o``, clamped to [0, n - 1]."""
    s = offset + (cast(o, f32) + 0.5) * scale - 0.5
    return min(max(s, 0.0), cast(n - 1, f32))


@kernel
def resize_hwc_to_nchw(img: Tensor, out: Output, y0: float, x0: float, sy: float, sx: float):
    """Bilinear sample of the box (y0, x0, sy*OH, sx*OW) of an HWC image into NCHW float."""
    _n, c, oy, ox = out.index
    h = img.shape[0]
    w = img.shape[1]
    fy = source_coord(oy, y0, sy, h)
    fx = source_coord(ox, x0, sx, w)
    iy = cast(floor(fy), i32)
    ix = cast(floor(fx), i32)
    iy1 = min(iy + 1, h - 1)
    ix1 = min(ix + 1, w - 1)
    wy = fy - floor(fy)
    wx = fx - floor(fx)
    a = cast(img[iy, ix, c], f32)
    b = cast(img[iy, ix1, c], f32)
    d = cast(img[iy1, ix, c], f32)
    e = cast(img[iy1, ix1, c], f32)
    top = a + (b - a) * wx
    bottom = d + (e - d) * wx
    return top + (bottom - top) * wy


@kernel
def resize_planes(x: Tensor, out: Output):
    """Bilinear (half-pixel) resize of the last two axes; leading axes are kept."""
    oh = out.shape[out.ndim - 2]
    ow = out.shape[out.ndim - 1]
    h = x.shape[x.ndim - 2]
    w = x.shape[x.ndim - 1]
    plane = out.flat // (oh * ow)
    rest = out.flat % (oh * ow)
    fy = source_coord(rest // ow, 0.0, cast(h, f32) / cast(oh, f32), h)
    fx = source_coord(rest % ow, 0.0, cast(w, f32) / cast(ow, f32), w)
    iy = cast(floor(fy), i32)
    ix = cast(floor(fx), i32)
    iy1 = min(iy + 1, h - 1)
    ix1 = min(ix + 1, w - 1)
    wy = fy - floor(fy)
    wx = fx - floor(fx)
    base = plane * (h * w)
    a = cast(x.flat[base + iy * w + ix], f32)
    b = cast(x.flat[base + iy * w + ix1], f32)
    d = cast(x.flat[base + iy1 * w + ix], f32)
    e = cast(x.flat[base + iy1 * w + ix1], f32)
    top = a + (b - a) * wx
    bottom = d + (e - d) * wx
    return top + (bottom - top) * wy


@kernel
def normalize_nchw(x: Tensor, mean: Tensor, std: Tensor, out: Output, scale: float):
    """(x * scale - mean[c]) / std[c] over the channel axis of NCHW."""
    c = out.index[1]
    return (x.flat[out.flat] * scale - mean[c]) / std[c]


@kernel
def nchw_to_hwc_u8(x: Tensor, out: Output, scale: float, offset: float):
    """x[0, c, h, w] * scale + offset, rounded and clamped into an HWC uint8 image."""
    h, w, c = out.index
    return to_u8(x[0, c, h, w] * scale + offset)


@kernel
def plane_to_u8(x: Tensor, out: Output, scale: float):
    """A float plane (any shape) * scale, rounded and clamped to uint8."""
    return to_u8(x.flat[out.flat] * scale)
