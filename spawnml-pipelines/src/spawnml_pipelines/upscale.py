"""Super-resolution (ESPCN ×3) of an image of any size, by overlapping tiles."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spawnml.errors import InvalidInputError
from spawnml.hub import ProgressBar

from . import imageops as ops
from .base import BackendRef, ModelRef, Pipeline
from .image_io import ImageInput, load_image
from .imageops import Image
from .kernels.tiling import TileGrid, tile_grid

if TYPE_CHECKING:
    from spawnml.tensor import DeviceTensor

    from .recording import PlanTensor, RecordingDevice


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

    def upscale_luma(self, img: Image) -> DeviceTensor:
        """The blended full-resolution luma plane (0..1) of an RGB image, on the device: each
        tile is cut out, upscaled and placed in a stack there, then the stack is blended."""
        h, w = img.shape[:2]
        dev = self.device
        grid = tile_grid(h, w, *self.tile, self.overlap)
        luma = ops.luma(dev, img)
        stack = None
        try:
            with ProgressBar(grid.count, "upscale", unit="tile", enabled=self.progress) as bar:
                for i in range(grid.count):
                    stack = self._upscale_tile(luma, grid, i, stack)
                    bar.update(1)
        finally:
            luma.close()
        assert stack is not None and self.scale is not None
        scale = self.scale
        try:
            return ops.blend_tiles(dev, stack, grid, (h * scale, w * scale), scale,
                                   self.margin * scale)
        finally:
            stack.close()

    def _upscale_tile(self, luma: Image, grid: TileGrid, i: int, stack: Image | None) -> Image:
        """``stack`` with tile ``i`` of ``luma`` upscaled into its slot."""
        x = ops.extract_tile(self.device, luma, grid, i)
        try:
            y = self.run_model(x)
        finally:
            x.close()
        try:
            scale = y.shape[2] // self.tile[0]
            if scale < 1 or tuple(y.shape[1:]) != (1, scale * self.tile[0], scale * self.tile[1]):
                if stack is not None:
                    stack.close()
                raise InvalidInputError(f"model output {tuple(y.shape[1:])} is not an integer "
                                        f"upscaling of {self.tile} tiles")
            self.scale = scale
            placed = ops.place_tile(self.device, stack, y, i, grid.count)
        finally:
            y.close()
        if stack is not None:
            stack.close()
        return placed

    def __call__(self, image: ImageInput) -> np.ndarray:
        img = load_image(image)
        hr = self.upscale_luma(img)
        try:
            return self.device.get(ops.merge_luma_chroma(self.device, hr, img))
        finally:
            hr.close()

    def record(self, dev: RecordingDevice, img: PlanTensor) -> None:
        """The page's plan: the upscaled RGB image (every tile's model run is spliced in)."""
        hr = self.upscale_luma(img)
        dev.output("rgb", ops.merge_luma_chroma(dev, hr, img))
        hr.close()
