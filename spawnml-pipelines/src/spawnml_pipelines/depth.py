"""Monocular depth estimation (Depth-Anything-style) with a colour-mapped visualisation."""

from __future__ import annotations

import numpy as np

from spawnml.tensor import DeviceTensor

from . import imageops as ops
from .base import BackendRef, Floats, ModelRef, Pipeline, floats
from .classify import IMAGENET_MEAN, IMAGENET_STD
from .device import Device
from .image_io import ImageInput, load_image
from .kernels.colormap import COLORMAPS


class DepthResult:
    """The depth map at the image's exact size, on the device, with its min/max.

    ``colorize(name)`` launches only the colour-map kernel: the model and the upscaling
    never run again."""

    def __init__(self, device: Device, depth: DeviceTensor, stats: DeviceTensor) -> None:
        self.device = device
        self._depth = depth
        self._stats = stats

    @property
    def depth(self) -> np.ndarray:
        """(H, W) float32 relative depth (larger is nearer, as Depth Anything predicts)."""
        return self._depth.numpy()

    def colorize(self, colormap: str = "plasma") -> np.ndarray:
        """An (H, W, 3) uint8 visualisation through ``colormap``."""
        return self.device.get(ops.colorize(self.device, self._depth, colormap, self._stats))

    def close(self) -> None:
        self._depth.close()
        self._stats.close()


class DepthEstimationPipeline(Pipeline):
    """Resize to the model's input size, normalise, predict, upscale bilinearly to the image's
    exact size (and so its aspect), then colour-map."""

    task = "depth"
    default_model = "depth_tiny"
    colormaps = COLORMAPS

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *,
                 size: tuple[int, int] | None = None, mean: Floats = None, std: Floats = None,
                 progress: bool | None = None) -> None:
        super().__init__(model, backend, progress=progress)
        self.size = size or self.fixed_size() or (518, 518)
        self.mean = floats(mean or self.meta("mean"), 3, "mean") or IMAGENET_MEAN
        self.std = floats(std or self.meta("std"), 3, "std") or IMAGENET_STD

    def __call__(self, image: ImageInput) -> DepthResult:
        img = load_image(image)
        h, w = img.shape[:2]
        with self.steps(2) as bar:
            x = ops.to_nchw(self.device, img, self.size, None, self.mean, self.std)
            try:
                pred = self.run_model(x)
            finally:
                x.close()
            bar.update(1)
            try:
                plane = pred.reshape(pred.shape[-2:]) if pred.ndim > 2 else pred
                depth = ops.resize_plane(self.device, plane, (h, w))
            finally:
                pred.close()
            bar.update(1)
        return DepthResult(self.device, depth, ops.minmax(self.device, depth))
