"""Fast neural style transfer (TransformerNet): pixels 0–255 in, clamped 0–255 out."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from spawnml.tensor import DeviceTensor

from . import imageops as ops
from .base import BackendRef, ModelRef, Pipeline
from .image_io import ImageInput, load_image
from .imageops import Image

if TYPE_CHECKING:
    from .recording import PlanTensor, RecordingDevice


class StyleTransferPipeline(Pipeline):
    """A model with a fixed input size sees the image resized to it, and its output is
    resized back to the image's size; a model with free spatial dims sees the image as is
    (its longer side capped at ``max_side``)."""

    task = "style"
    default_model = "transformer_net"

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *, max_side: int = 1024,
                 progress: bool | None = None) -> None:
        super().__init__(model, backend, progress=progress)
        self.max_side = max_side

    def model_size(self, h: int, w: int) -> tuple[int, int]:
        fixed = self.fixed_size()
        if fixed:
            return fixed
        scale = min(1.0, self.max_side / max(h, w))
        return max(1, round(h * scale)), max(1, round(w * scale))

    def __call__(self, image: ImageInput) -> np.ndarray:
        with self.steps(2) as bar:
            return self.device.get(self.stylize(load_image(image), bar.update))

    def stylize(self, img: Image, step: Callable[[int], object] = lambda n: None
                ) -> DeviceTensor:
        """The styled HWC uint8 image at the image's size, on the device."""
        h, w = img.shape[:2]
        x = ops.to_nchw(self.device, img, self.model_size(h, w))  # 0..255, no normalisation
        try:
            y = self.run_model(x)
        finally:
            x.close()
        step(1)
        try:
            if tuple(y.shape[-2:]) != (h, w):
                resized = ops.resize_plane(self.device, y, (h, w))
                y.close()
                y = resized
            return ops.chw_to_image(self.device, y)
        finally:
            y.close()
            step(1)

    def record(self, dev: RecordingDevice, img: PlanTensor) -> None:
        """The page's plan: the styled RGB image."""
        dev.output("rgb", self.stylize(img))
