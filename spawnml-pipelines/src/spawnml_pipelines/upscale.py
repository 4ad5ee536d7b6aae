"""Super-resolution (ESPCN ×3) of an image of any size, by overlapping tiles."""

from __future__ import annotations

import numpy as np

from spawnml.errors import InvalidInputError
from spawnml.hub import ProgressBar

from . import imageops as ops
from .base import BackendRef, ModelRef, Pipeline
from .image_io import ImageInput, load_image
from .kernels.tiling import tile_grid


class SuperResolutionPipeline(Pipeline):
    """The luma plane (BT.601) is cut into overlapping tiles of the model's input size, each
    tile upscaled, and the tiles blended into the full-resolution luma plane (weights
    cross-fade the overlaps; ``margin`` low-resolution pixels at inner tile edges, where the
    model's zero padding shows, are left out). The chroma is upsampled bilinearly and the
    planes recombined to RGB: full resolution, colour and aspect are kept, no seams."""

    task = "upscale"
    default_model = "espcn_x3"

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *,
                 tile: int | None = None, overlap: int = 16, margin: int | None = None,
                 progress: bool | None = None) -> None:
        super().__init__(model, backend, progress=progress)
        fixed = self.fixed_size()
        if fixed and tile and (tile, tile) != fixed:
            raise InvalidInputError(f"the model takes fixed {fixed} tiles; --tile {tile} differs")
        self.tile = fixed or (tile or 128, tile or 128)
        self.overlap = overlap
        self.margin = overlap // 4 if margin is None else margin
        if not 0 <= 2 * self.margin < overlap < min(self.tile):
            raise InvalidInputError(
                f"need 0 <= 2*margin ({self.margin}) < overlap ({overlap}) < tile {self.tile}")
        self.scale: int | None = None

    def _upscale_tiles(self, tiles: np.ndarray) -> np.ndarray:
        outs = []
        with ProgressBar(len(tiles), "upscale", unit="tile", enabled=self.progress) as bar:
            for i in range(len(tiles)):
                outs.append(self.device.get(self.run_model(tiles[i : i + 1])))
                bar.update(1)
        return np.concatenate(outs)

    def upscale_luma(self, img: np.ndarray):
        """The blended full-resolution luma plane (0..1) of an RGB image, on the device."""
        h, w = img.shape[:2]
        dev = self.device
        grid = tile_grid(h, w, *self.tile, self.overlap)
        luma = ops.luma(dev, img)
        try:
            tiles = dev.get(ops.extract_tiles(dev, luma, grid))
        finally:
            luma.close()
        up = self._upscale_tiles(tiles)
        scale = up.shape[2] // self.tile[0]
        if scale < 1 or up.shape[2:] != (scale * self.tile[0], scale * self.tile[1]):
            raise InvalidInputError(f"model output {up.shape[1:]} is not an integer upscaling "
                                    f"of {self.tile} tiles")
        self.scale = scale
        return ops.blend_tiles(dev, up, grid, (h * scale, w * scale), scale, self.margin * scale)

    def __call__(self, image: ImageInput) -> np.ndarray:
        img = load_image(image)
        hr = self.upscale_luma(img)
        try:
            return self.device.get(ops.merge_luma_chroma(self.device, hr, img))
        finally:
            hr.close()
