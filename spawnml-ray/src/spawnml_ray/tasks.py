"""What each pipeline task returns as one row of a batch: scalar columns, plus images encoded
as PNG bytes (``file:<suffix>`` columns) that ``spawnml batch`` writes next to the results.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FILE_PREFIX = "file:"


def png_bytes(array: np.ndarray) -> bytes:
    """An (H, W), (H, W, 3) or (H, W, 4) uint8 array encoded as PNG."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buf, format="PNG")
    return buf.getvalue()


@dataclass(frozen=True)
class TaskOutput:
    """How a task's result becomes a row: ``run(pipe, image, options)`` gives the row and
    ``empty`` is the row of an item that failed (same columns, null values)."""

    run: Callable[[Any, np.ndarray, dict[str, Any]], dict[str, Any]]
    empty: dict[str, Any]


def _classify(pipe: Any, image: np.ndarray, options: dict[str, Any]) -> dict[str, Any]:
    preds = pipe(image, top_k=int(options.get("top_k", 5)))
    best = preds[0]
    return {
        "label": best.label,
        "score": best.score,
        "class_index": best.index,
        "top_k": json.dumps([[p.label, p.score, p.index] for p in preds]),
    }


def _remove_bg(pipe: Any, image: np.ndarray, options: dict[str, Any]) -> dict[str, Any]:
    result = pipe(image, background=options.get("background", "transparent"))
    mask = (np.clip(result.mask, 0, 1) * 255).round().astype(np.uint8)
    return {f"{FILE_PREFIX}.png": png_bytes(result.image),
            f"{FILE_PREFIX}.mask.png": png_bytes(mask)}


def _depth(pipe: Any, image: np.ndarray, options: dict[str, Any]) -> dict[str, Any]:
    result = pipe(image)
    try:
        return {f"{FILE_PREFIX}.png": png_bytes(result.colorize(options.get("colormap",
                                                                            "plasma")))}
    finally:
        result.close()


def _image(pipe: Any, image: np.ndarray, options: dict[str, Any]) -> dict[str, Any]:
    return {f"{FILE_PREFIX}.png": png_bytes(pipe(image))}


TASKS: dict[str, TaskOutput] = {
    "classify": TaskOutput(_classify, {"label": None, "score": None, "class_index": None,
                                       "top_k": None}),
    "remove-bg": TaskOutput(_remove_bg, {f"{FILE_PREFIX}.png": None,
                                         f"{FILE_PREFIX}.mask.png": None}),
    "depth": TaskOutput(_depth, {f"{FILE_PREFIX}.png": None}),
    "style": TaskOutput(_image, {f"{FILE_PREFIX}.png": None}),
    "upscale": TaskOutput(_image, {f"{FILE_PREFIX}.png": None}),
}


def task_output(task: str) -> TaskOutput:
    """The row mapping of a pipeline task (its transformers.js alias accepted)."""
    from spawnml.errors import InvalidInputError

    try:
        from spawnml_pipelines import ALIASES
    except ImportError as exc:
        raise InvalidInputError(
            "pipeline tasks need spawnml-pipelines: pip install 'spawnml-ray[pipelines]'"
        ) from exc
    name = ALIASES.get(task, task)
    if name not in TASKS:
        raise InvalidInputError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    return TASKS[name]
