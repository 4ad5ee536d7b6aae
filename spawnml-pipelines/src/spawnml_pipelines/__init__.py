"""spawnml's pipelines: classification, depth, style, background removal, upscaling (images)
and text generation.

    from spawnml_pipelines import pipeline
    remove_bg = pipeline("remove-bg", model="isnet", backend="webgpu")
    result = remove_bg("cat.png")          # result.image: RGBA uint8, result.mask: 0..1
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from spawnml.errors import InvalidInputError

from .base import Pipeline
from .classify import ImageClassificationPipeline, Prediction
from .depth import DepthEstimationPipeline, DepthResult
from .remove_bg import BackgroundRemovalPipeline, BackgroundRemovalResult
from .style import StyleTransferPipeline
from .text.pipeline import TextGenerationPipeline
from .upscale import SuperResolutionPipeline

PIPELINES: dict[str, type[Pipeline]] = {
    cls.task: cls
    for cls in (ImageClassificationPipeline, DepthEstimationPipeline, StyleTransferPipeline,
                BackgroundRemovalPipeline, SuperResolutionPipeline, TextGenerationPipeline)
}
ALIASES = {
    "image-classification": "classify",
    "depth-estimation": "depth",
    "style-transfer": "style",
    "background-removal": "remove-bg",
    "super-resolution": "upscale",
    "image-to-image": "upscale",
    "generate": "text-generation",
}


def pipeline(task: str, model: str | os.PathLike | None = None,
             backend: str | Sequence[str] | None = None, **options: Any) -> Pipeline:
    """A ready pipeline for ``task`` (classify, depth, style, remove-bg, upscale, or the
    transformers.js task names); ``model`` is a path, URL or known name (default per task),
    ``backend`` a backend name or a preference list; ``options`` go to the pipeline class."""
    from .plugin import registered_pipelines

    known = registered_pipelines()
    name = ALIASES.get(task, task)
    if name not in known:
        raise InvalidInputError(f"unknown task {task!r}; known: {', '.join(sorted(known))} "
                                f"(or {', '.join(sorted(ALIASES))})")
    return known[name](model, backend, **options)


__all__ = [
    "pipeline", "Pipeline", "PIPELINES", "ImageClassificationPipeline", "Prediction",
    "DepthEstimationPipeline", "DepthResult", "StyleTransferPipeline",
    "BackgroundRemovalPipeline", "BackgroundRemovalResult", "SuperResolutionPipeline",
    "TextGenerationPipeline",
]
