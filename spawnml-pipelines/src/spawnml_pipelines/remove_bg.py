"""Background removal with IS-Net: a mask at 1024×1024, upscaled to the image, composited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spawnml.errors import InvalidInputError
from spawnml.tensor import DeviceTensor

from . import imageops as ops
from .base import BackendRef, Floats, ModelRef, Pipeline, floats
from .image_io import ImageInput, load_image
from .imageops import Image

if TYPE_CHECKING:
    from .recording import PlanTensor, RecordingDevice

BACKGROUNDS = ("transparent", "color", "blur")


def parse_color(text: str | tuple[int, int, int]) -> tuple[int, int, int]:
    """"#RRGGBB", "R,G,B" or a tuple -> an RGB triple."""
    try:
        if not isinstance(text, str):
            rgb = tuple(int(v) for v in text)
        elif text.startswith("#") and len(text) == 7:
            rgb = tuple(int(text[i : i + 2], 16) for i in (1, 3, 5))
        else:
            rgb = tuple(int(v) for v in text.split(","))
    except (TypeError, ValueError):
        rgb = ()
    if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
        raise InvalidInputError(f"colour {text!r}: expected #RRGGBB or R,G,B in 0..255")
    return rgb  # type: ignore[return-value]


@dataclass
class BackgroundRemovalResult:
    image: np.ndarray  # (H, W, 4) for "transparent", else (H, W, 3), uint8
    mask: np.ndarray  # (H, W) float32 in 0..1: 1 keeps the pixel


class BackgroundRemovalPipeline(Pipeline):
    """IS-Net preprocessing as @imgly/background-removal does it: bilinear resize to the
    model's 1024×1024, ``(pixel - 128) / 256``; the sigmoid mask is upscaled bilinearly to
    the image and becomes its alpha channel, or blends it over a colour or a blurred copy."""

    task = "remove-bg"
    default_model = "isnet"

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *,
                 size: tuple[int, int] | None = None, mean: Floats = None, std: Floats = None,
                 progress: bool | None = None) -> None:
        super().__init__(model, backend, progress=progress)
        self.size = size or self.fixed_size() or (1024, 1024)
        self.mean = floats(mean or self.meta("mean"), 3, "mean") or (128.0,) * 3
        self.std = floats(std or self.meta("std"), 3, "std") or (256.0,) * 3

    def record(self, dev: RecordingDevice, img: PlanTensor) -> None:
        """The page's plan: the RGBA cut-out (alpha: the mask) and the mask itself."""
        mask = self.mask(img)
        dev.output("rgba", self._composite(img, mask, "transparent", (0, 0, 0), None))
        dev.output("mask", mask)

    def mask(self, img: Image) -> DeviceTensor:
        """The (H, W) mask on the device."""
        return self.predict_plane(img, self.size, self.mean, self.std)

    def __call__(self, image: ImageInput, background: str = "transparent",
                 color: str | tuple[int, int, int] = (255, 255, 255),
                 blur_sigma: float | None = None) -> BackgroundRemovalResult:
        if background not in BACKGROUNDS:
            raise InvalidInputError(f"background {background!r}: choose one of {BACKGROUNDS}")
        img = load_image(image)
        with self.steps(2) as bar:
            mask = self.mask(img)
            bar.update(1)
            try:
                out = self._composite(img, mask, background, color, blur_sigma)
                return BackgroundRemovalResult(self.device.get(out), mask.numpy())
            finally:
                bar.update(1)
                mask.close()

    def _composite(self, img: Image, mask: DeviceTensor, background: str,
                   color: str | tuple[int, int, int], blur_sigma: float | None
                   ) -> DeviceTensor:
        dev = self.device
        if background == "transparent":
            return ops.with_alpha(dev, img, mask)
        if background == "color":
            rgb = np.array(parse_color(color), np.uint8).reshape(1, 1, 3)
            return ops.composite_over(dev, img, mask, rgb)
        blurred = ops.gaussian_blur(dev, img, blur_sigma or max(img.shape[:2]) / 50)
        try:
            return ops.composite_over(dev, img, mask, blurred)
        finally:
            blurred.close()
