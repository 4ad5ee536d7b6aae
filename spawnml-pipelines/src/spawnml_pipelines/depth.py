"""Monocular depth estimation (Depth-Anything-style) with a colour-mapped visualisation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from spawnml.tensor import DeviceTensor

from . import imageops as ops
from .base import BackendRef, Floats, ModelRef, Pipeline, floats
from .classify import IMAGENET_MEAN, IMAGENET_STD
from .device import Device
from .image_io import ImageInput, load_image
from .imageops import Image
from .kernels import colormap as cm
from .kernels.colormap import COLORMAPS

if TYPE_CHECKING:
    from .recording import PlanTensor, RecordingDevice


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
        with self.steps(2) as bar:
            depth, stats = self.predict(load_image(image), bar.update)
        return DepthResult(self.device, depth, stats)

    def predict(self, img: Image, step: Callable[[int], object] = lambda n: None
                ) -> tuple[DeviceTensor, DeviceTensor]:
        """The depth plane at the image's size and its (min, max), on the device."""
        depth = self.predict_plane(img, self.size, self.mean, self.std, step)
        return depth, ops.minmax(self.device, depth)

    def record(self, dev: RecordingDevice, img: PlanTensor) -> None:
        """The page's plan: the depth plane and its (min, max); a second stage colours them
        with the coefficients of the colour map the page picks (no new inference)."""
        depth, stats = self.predict(img)
        dev.output("depth", depth)
        dev.output("stats", stats)
        dev.stage("colorize")
        coefficients = cm.colormap_coefficients(self.colormaps[0])
        rgb = ops.colorize(dev, dev.input("depth", depth.shape, depth.dtype), self.colormaps[0],
                           dev.input("stats", stats.shape, stats.dtype),
                           coefficients=dev.input("coefficients", coefficients.shape,
                                                  coefficients.dtype))
        dev.output("rgb", rgb)
        dev.page["colormaps"] = {name: cm.colormap_coefficients(name).tolist()
                                 for name in self.colormaps}
