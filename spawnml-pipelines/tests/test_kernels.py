"""Every pixel kernel against its numpy reference, on every available backend."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml_pipelines import imageops as ops
from spawnml_pipelines.device import Device
from spawnml_pipelines.kernels import reference as ref, tiling
from spawnml_pipelines.kernels.colormap import COLORMAPS

# Tolerances: float kernels compute in f32 against a float64 reference, so ~1e-4 relative;
# uint8 outputs may differ by one level where a value lies within f32 rounding of .5.
F32_TOL = dict(rtol=1e-4, atol=1e-3)


def assert_u8_close(got: np.ndarray, want: np.ndarray, max_off_by_one: float = 0.01) -> None:
    assert got.shape == want.shape and got.dtype == np.uint8
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1, f"max difference {diff.max()}"
    assert (diff > 0).mean() <= max_off_by_one, f"{(diff > 0).mean():.4f} of values off by one"


@pytest.mark.parametrize("box", [None, (10.5, 3.0, 40.0, 57.0)])
def test_to_nchw_resize_and_normalize(any_device: Device, photo_like, box) -> None:
    img = photo_like(61, 83)
    mean, std = (123.7, 116.3, 103.5), (58.4, 57.1, 57.4)
    got = any_device.get(ops.to_nchw(any_device, img, (32, 48), box, mean, std, scale=1.0))
    want = ref.normalize_nchw(ref.resize_hwc_to_nchw(img, 32, 48, box), mean, std, 1.0)
    np.testing.assert_allclose(got, want, **F32_TOL)


def test_upscaling_resize_plane(any_device: Device, rng) -> None:
    x = rng.normal(size=(1, 1, 17, 23)).astype(np.float32)
    got = any_device.get(ops.resize_plane(any_device, x, (50, 31)))
    np.testing.assert_allclose(got, ref.resize_planes(x, 50, 31), **F32_TOL)


def test_chw_to_image(any_device: Device, rng) -> None:
    x = rng.uniform(-20, 280, size=(1, 3, 9, 11)).astype(np.float32)
    got = any_device.get(ops.chw_to_image(any_device, x, 1.0, 0.0))
    assert_u8_close(got, ref.nchw_to_hwc_u8(x))


def test_center_crop_box() -> None:
    # 300x400 resized so the short side is 256, then a 224 crop: source box 262.5 square
    y0, x0, bh, bw = ops.center_crop_box(300, 400, (224, 224), 256)
    assert (bh, bw) == pytest.approx((262.5, 262.5))
    assert (y0, x0) == pytest.approx((18.75, 68.75))


@pytest.mark.parametrize("name", COLORMAPS)
def test_colormaps(any_device: Device, rng, name: str) -> None:
    x = rng.normal(size=(37, 29)).astype(np.float32) * 3 + 2
    stats = any_device.get(ops.minmax(any_device, x))
    np.testing.assert_array_equal(stats, [x.min(), x.max()])
    got = any_device.get(ops.colorize(any_device, x, name))
    assert_u8_close(got, ref.colormap(x, name))


def test_colormap_endpoints_match_matplotlib() -> None:
    """The polynomial fits land within 5/255 of matplotlib's table ends."""
    x = np.array([[0.0, 1.0]], np.float32)
    known = {
        "viridis": [(68, 1, 84), (253, 231, 37)],
        "plasma": [(13, 8, 135), (240, 249, 33)],
        "inferno": [(0, 0, 4), (252, 255, 164)],
        "grayscale": [(0, 0, 0), (255, 255, 255)],
    }
    for name, ends in known.items():
        got = ref.colormap(x, name)[0].astype(int)
        assert np.abs(got - np.array(ends)).max() <= 5, (name, got)


def test_constant_plane_colorizes_without_nan(any_device: Device) -> None:
    got = any_device.get(ops.colorize(any_device, np.full((4, 5), 3.0, np.float32), "grayscale"))
    assert (got == 0).all()


def test_blur_and_composites(any_device: Device, rng, photo_like) -> None:
    img = photo_like(40, 52)
    alpha = rng.uniform(-0.1, 1.1, size=(40, 52)).astype(np.float32)
    blurred = ops.gaussian_blur(any_device, img, 2.5)
    blurred_host = blurred.numpy()
    np.testing.assert_allclose(blurred_host, ref.gaussian_blur(img, 8, 2.5), rtol=1e-4, atol=2e-3)
    rgba = any_device.get(ops.with_alpha(any_device, img, alpha))
    assert_u8_close(rgba, ref.alpha_to_rgba(img, np.clip(alpha, 0, 1)))
    color = np.array([[[0, 177, 64]]], np.uint8)
    assert_u8_close(any_device.get(ops.composite_over(any_device, img, alpha, color)),
                    ref.composite_over(img, alpha, color))
    assert_u8_close(any_device.get(ops.composite_over(any_device, img, alpha, blurred)),
                    ref.composite_over(img, alpha, blurred_host))


def test_luma_and_merge_roundtrip(any_device: Device, photo_like) -> None:
    img = photo_like(20, 30)
    y = any_device.get(ops.luma(any_device, img))
    np.testing.assert_allclose(y, ref.rgb_to_luma(img), **F32_TOL)
    # same size: luma + own chroma reconstructs the image (BT.601 round trip)
    back = any_device.get(ops.merge_luma_chroma(any_device, y, img))
    assert np.abs(back.astype(int) - img.astype(int)).max() <= 1
    # upscaled x3
    y3 = ref.resize_planes(y[None, None], 60, 90)[0, 0]
    assert_u8_close(any_device.get(ops.merge_luma_chroma(any_device, y3, img)),
                    ref.merge_luma_chroma(y3, img))


def test_tile_grid() -> None:
    np.testing.assert_array_equal(tiling.axis_origins(100, 32, 24), [0, 24, 48, 68])
    np.testing.assert_array_equal(tiling.axis_origins(32, 32, 24), [0])
    np.testing.assert_array_equal(tiling.axis_origins(20, 32, 24), [0])
    grid = tiling.tile_grid(70, 100, 32, 32, 8)
    assert grid.count == 3 * 4
    with pytest.raises(ValueError):
        tiling.tile_grid(70, 100, 32, 32, 32)


@pytest.mark.parametrize("hw", [(70, 100), (20, 25)])
def test_extract_and_blend_tiles(any_device: Device, rng, hw) -> None:
    h, w = hw
    plane = rng.uniform(size=(h, w)).astype(np.float32)
    grid = tiling.tile_grid(h, w, 32, 32, 12)
    tiles = any_device.get(ops.extract_tiles(any_device, plane, grid))
    for i, (oy, ox) in enumerate((a, b) for a in grid.oy for b in grid.ox):
        want = plane[oy : oy + 32, ox : ox + 32]
        np.testing.assert_array_equal(tiles[i, 0, : want.shape[0], : want.shape[1]], want)
    # "upscale" each tile x2 with its own noise, then blend
    up = np.repeat(np.repeat(tiles, 2, 2), 2, 3) + rng.normal(0, 0.01, (grid.count, 1, 64, 64))
    up = up.astype(np.float32)
    got = any_device.get(ops.blend_tiles(any_device, up, grid, (2 * h, 2 * w), 2, margin=4))
    want = ref.blend_tiles(up, grid, 2 * h, 2 * w, 2, margin=4, ramp=24.0 - 8)
    np.testing.assert_allclose(got, want, **F32_TOL)


def test_tiles_one_at_a_time_stack_up_on_the_device(any_device: Device, rng) -> None:
    """extract_tile cuts tile i as (1, 1, th, tw); place_tile builds the (T, ...) stack that
    blend_tiles reads, each slot from its own launch (the upscale pipeline's loop)."""
    plane = rng.uniform(size=(70, 100)).astype(np.float32)
    grid = tiling.tile_grid(70, 100, 32, 32, 12)
    want = any_device.get(ops.extract_tiles(any_device, plane, grid))
    stack = None
    for i in range(grid.count):
        tile = ops.extract_tile(any_device, plane, grid, i)
        np.testing.assert_array_equal(tile.numpy()[0], want[i])
        placed = ops.place_tile(any_device, stack, tile, i, grid.count)
        if i == 0:  # the first launch starts the stack: the other slots are zeros
            got = placed.numpy()
            np.testing.assert_array_equal(got[0], want[0])
            assert not got[1:].any()
        tile.close()
        if stack is not None:
            stack.close()
        stack = placed
    assert stack is not None
    np.testing.assert_array_equal(any_device.get(stack), want)


def test_blend_of_identical_tiles_is_exact(any_device: Device, rng) -> None:
    """Tiles cut from one big "upscaled" plane blend back to that plane (no seams)."""
    h, w, s = 50, 64, 3
    big = rng.uniform(size=(h * s, w * s)).astype(np.float32)
    grid = tiling.tile_grid(h, w, 24, 24, 8)
    tiles = np.stack([big[oy * s : (oy + 24) * s, ox * s : (ox + 24) * s]
                      for oy in grid.oy for ox in grid.ox])[:, None]
    got = any_device.get(ops.blend_tiles(any_device, tiles, grid, (h * s, w * s), s, margin=6))
    np.testing.assert_allclose(got, big, rtol=1e-5, atol=1e-5)
