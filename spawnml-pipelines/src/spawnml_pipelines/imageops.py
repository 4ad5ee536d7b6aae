"""Image operations of the pipelines, each a kernel launch (or a few) on a Device.

Inputs may be host arrays or DeviceTensors; results are DeviceTensors (``Device.get`` brings
them to the host), so a chain of operations stays on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.tensor import DeviceTensor

from .device import Device
from .kernels import colormap as cm, composite, resample, tiling

Image = DeviceTensor | np.ndarray


def _shape(x: Image) -> tuple[int, ...]:
    return tuple(x.shape)


def to_nchw(
    dev: Device,
    img: Image,
    size: tuple[int, int],
    box: tuple[float, float, float, float] | None = None,
    mean: Sequence[float] = (0.0, 0.0, 0.0),
    std: Sequence[float] = (1.0, 1.0, 1.0),
    scale: float = 1.0,
) -> DeviceTensor:
    """Resize (bilinear, half-pixel) the box ``(y0, x0, h, w)`` of an HWC image to ``size``
    and normalise it to NCHW float32: ``(pixel * scale - mean[c]) / std[c]``."""
    h, w, c = _shape(img)
    oh, ow = size
    y0, x0, bh, bw = box if box is not None else (0.0, 0.0, float(h), float(w))
    resized = dev.run(resample.resize_hwc_to_nchw, [img], (1, c, oh, ow), "float32",
                      y0=float(y0), x0=float(x0), sy=bh / oh, sx=bw / ow)
    try:
        return dev.run(resample.normalize_nchw,
                       [resized, np.asarray(mean, np.float32), np.asarray(std, np.float32)],
                       resized.shape, "float32", scale=float(scale))
    finally:
        resized.close()


def center_crop_box(h: int, w: int, size: tuple[int, int], resize_short: int | None
                    ) -> tuple[float, float, float, float]:
    """The source box that "resize the short side to ``resize_short``, then centre-crop
    ``size``" samples (torchvision's classification preprocessing)."""
    oh, ow = size
    short = resize_short or min(oh, ow)
    scale = short / min(h, w)  # output pixels per source pixel
    bh, bw = oh / scale, ow / scale
    return ((h - bh) / 2, (w - bw) / 2, bh, bw)


def resize_plane(dev: Device, x: Image, size: tuple[int, int]) -> DeviceTensor:
    """Bilinear (half-pixel) resize of the last two axes to ``size``."""
    shape = _shape(x)
    return dev.run(resample.resize_planes, [x], (*shape[:-2], *size), "float32")


def chw_to_image(dev: Device, x: Image, scale: float = 1.0, offset: float = 0.0) -> DeviceTensor:
    """A (1, C, H, W) float tensor as an HWC uint8 image: round(x * scale + offset), clamped."""
    _, c, h, w = _shape(x)
    return dev.run(resample.nchw_to_hwc_u8, [x], (h, w, c), "uint8", scale=scale, offset=offset)


def minmax(dev: Device, plane: Image) -> DeviceTensor:
    """(min, max) of a 2-D plane in two reduction launches (rows, then the row results)."""
    h = _shape(plane)[0]
    rows = dev.run(cm.rows_minmax, [plane], (h, 2), "float32")
    try:
        return dev.run(cm.final_minmax, [rows], (2,), "float32")
    finally:
        rows.close()


def colorize(dev: Device, plane: Image, name: str, stats: Image | None = None,
             coefficients: Image | None = None) -> DeviceTensor:
    """A 2-D plane normalised to its min/max (``stats``, else computed) and mapped through
    colour map ``name`` (or the given ``coefficients`` of one)."""
    if name not in cm.COLORMAPS:
        raise ValueError(f"unknown colour map {name!r}; choose one of {', '.join(cm.COLORMAPS)}")
    own = stats is None
    stats = minmax(dev, plane) if stats is None else stats
    if coefficients is None:
        coefficients = cm.colormap_coefficients(name)
    try:
        return dev.run(cm.apply_colormap, [plane, stats, coefficients],
                       (*_shape(plane), 3), "uint8")
    finally:
        if own:
            stats.close()


def gaussian_blur(dev: Device, img: Image, sigma: float) -> DeviceTensor:
    """Separable Gaussian blur (radius 3 sigma, edges clamped) of an HWC image; float out."""
    radius = max(1, int(np.ceil(3 * sigma)))
    rows = dev.run(composite.gaussian_blur_axis, [img], _shape(img), "float32",
                   axis=0, radius=radius, sigma=float(sigma))
    try:
        return dev.run(composite.gaussian_blur_axis, [rows], _shape(img), "float32",
                       axis=1, radius=radius, sigma=float(sigma))
    finally:
        rows.close()


def with_alpha(dev: Device, img: Image, alpha: Image) -> DeviceTensor:
    """RGBA uint8: the image's RGB with ``alpha`` (0..1, H×W) as the alpha channel."""
    h, w, _ = _shape(img)
    return dev.run(composite.alpha_to_rgba, [img, alpha], (h, w, 4), "uint8")


def composite_over(dev: Device, img: Image, alpha: Image, background: Image) -> DeviceTensor:
    """img over ``background`` (an RGB colour of shape (1, 1, 3) or an H×W×3 image)."""
    return dev.run(composite.composite_over, [img, alpha, background], _shape(img), "uint8")


def luma(dev: Device, img: Image) -> DeviceTensor:
    """BT.601 luma (0..1) of an RGB uint8 image."""
    h, w, _ = _shape(img)
    return dev.run(tiling.rgb_to_luma, [img], (h, w), "float32")


def extract_tiles(dev: Device, plane: Image, grid: tiling.TileGrid) -> DeviceTensor:
    """All tiles of a plane as one (T, 1, th, tw) tensor."""
    return dev.run(tiling.extract_tiles, [plane, grid.oy, grid.ox],
                   (grid.count, 1, grid.tile_h, grid.tile_w), "float32")


def extract_tile(dev: Device, plane: Image, grid: tiling.TileGrid, index: int) -> DeviceTensor:
    """Tile ``index`` (row-major over the grid) of a plane as a (1, 1, th, tw) tensor."""
    ny, nx = divmod(index, len(grid.ox))
    return dev.run(tiling.extract_tiles, [plane, grid.oy[ny:ny + 1], grid.ox[nx:nx + 1]],
                   (1, 1, grid.tile_h, grid.tile_w), "float32")


def place_tile(dev: Device, stack: Image | None, tile: Image, index: int, count: int
               ) -> DeviceTensor:
    """A (count, ...) stack of tiles with ``tile`` at ``index``: the other slots are
    ``stack``'s (zeros when ``stack`` is None)."""
    shape = (count, *_shape(tile)[1:])
    return dev.run(tiling.place_tile, [tile if stack is None else stack, tile], shape,
                   "float32", index=index, first=stack is None)


def blend_tiles(dev: Device, tiles: Image, grid: tiling.TileGrid, out_size: tuple[int, int],
                scale: int, margin: int) -> DeviceTensor:
    """The (H, W) plane blended from upscaled tiles; ``margin`` output pixels at each inner
    tile edge are discarded and the rest of the overlap is cross-faded."""
    overlap = min(grid.tile_h - grid.stride_h, grid.tile_w - grid.stride_w) * scale
    ramp = float(max(overlap - 2 * margin, 1))
    return dev.run(tiling.blend_tiles, [tiles, grid.oy, grid.ox], out_size, "float32",
                   scale=scale, stride_h=grid.stride_h, stride_w=grid.stride_w,
                   margin=margin, ramp=ramp)


def merge_luma_chroma(dev: Device, luma_hr: Image, img: Image) -> DeviceTensor:
    """RGB uint8 from a high-resolution luma plane and the low-resolution image's chroma."""
    h, w = _shape(luma_hr)
    return dev.run(tiling.merge_luma_chroma, [luma_hr, img], (h, w, 3), "uint8")
