"""Image classification: top-k labels with probabilities."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from spawnml.errors import InvalidInputError

from . import imageops as ops
from .base import BackendRef, Floats, ModelRef, Pipeline, floats
from .image_io import ImageInput, load_image
from .imageops import Image

if TYPE_CHECKING:
    from .recording import PlanTensor, RecordingDevice

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # 0.485, 0.456, 0.406 on 0..255 pixels
IMAGENET_STD = (58.395, 57.12, 57.375)


@dataclass(frozen=True)
class Prediction:
    label: str
    score: float
    index: int


def load_labels(source: str | os.PathLike) -> list[str]:
    """Labels from a text file (one per line) or a JSON list."""
    text = Path(source).read_text(encoding="utf-8")
    return _parse_labels(text)


def _parse_labels(text: str) -> list[str]:
    stripped = text.strip()
    if stripped.startswith("["):
        return [str(v) for v in json.loads(stripped)]
    return [line.strip() for line in stripped.splitlines()]


class ImageClassificationPipeline(Pipeline):
    """Resize the short side, centre-crop to the model's input, normalise, run, softmax.

    Preprocessing comes from the options, else the model's metadata (``spawnml.mean``,
    ``spawnml.std``, ``spawnml.resize_short``, ``labels``), else the ImageNet defaults."""

    task = "classify"
    default_model = "squeezenet1_1"

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *,
                 labels: str | os.PathLike | list[str] | None = None,
                 size: tuple[int, int] | None = None, resize_short: int | None = None,
                 mean: Floats = None, std: Floats = None, progress: bool | None = None) -> None:
        super().__init__(model, backend, progress=progress)
        size = size or self.fixed_size()
        if size is None:
            size = (224, 224)
        self.size = (int(size[0]), int(size[1]))
        short = resize_short or self.meta("resize_short")
        self.resize_short = int(short) if short else round(min(self.size) * 256 / 224)
        self.mean = floats(mean or self.meta("mean"), 3, "mean") or IMAGENET_MEAN
        self.std = floats(std or self.meta("std"), 3, "std") or IMAGENET_STD
        if isinstance(labels, list):
            self.labels: list[str] | None = labels
        elif labels is not None:
            self.labels = load_labels(labels)
        elif "labels" in self.metadata:
            self.labels = _parse_labels(self.metadata["labels"])
        else:
            self.labels = None

    def preprocess(self, img: Image):
        box = ops.center_crop_box(img.shape[0], img.shape[1], self.size, self.resize_short)
        return ops.to_nchw(self.device, img, self.size, box, self.mean, self.std)

    def record(self, dev: RecordingDevice, img: PlanTensor) -> None:
        """The page's plan: the logits (the page takes the softmax and the top k)."""
        dev.output("logits", self.run_model(self.preprocess(img)))
        dev.page["labels"] = self.labels

    def logits(self, image: ImageInput) -> np.ndarray:
        x = self.preprocess(load_image(image))
        try:
            return self.device.get(self.run_model(x)).reshape(-1)
        finally:
            x.close()

    def __call__(self, image: ImageInput, top_k: int = 5) -> list[Prediction]:
        logits = self.logits(image).astype(np.float64)
        if self.labels is not None and len(self.labels) != logits.size:
            raise InvalidInputError(
                f"{len(self.labels)} labels for a model with {logits.size} classes")
        # 1000 numbers: a host softmax, not pixel work
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        order = np.argsort(-probs, kind="stable")[: max(1, top_k)]
        return [Prediction(self.labels[i] if self.labels else f"class_{i}", float(probs[i]), int(i))
                for i in order]
