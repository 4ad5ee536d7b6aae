"""Image I/O with Pillow: everything else sees HWC uint8 numpy arrays."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from spawnml.errors import InvalidInputError

ImageInput = str | os.PathLike | np.ndarray | Image.Image


def load_image(source: ImageInput) -> np.ndarray:
    """An RGB uint8 (H, W, 3) array from a path, a PIL image or an array (gray, RGB, RGBA)."""
    if isinstance(source, (str, os.PathLike)):
        try:
            with Image.open(source) as im:
                return np.asarray(im.convert("RGB"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read image {os.fspath(source)!r}: {exc}") from exc
    if isinstance(source, Image.Image):
        return np.asarray(source.convert("RGB"))
    array = np.asarray(source)
    if array.dtype != np.uint8:
        raise InvalidInputError(f"image arrays must be uint8, got {array.dtype}")
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise InvalidInputError(f"image arrays must be (H, W[, 3 or 4]), got {array.shape}")
    return np.ascontiguousarray(array[..., :3])


def save_image(array: np.ndarray, path: str | os.PathLike) -> Path:
    """Write an (H, W), (H, W, 3) or (H, W, 4) uint8 array; the format follows the suffix
    (an RGBA image written as JPEG loses its alpha channel, so that is refused)."""
    path = Path(path)
    if array.ndim == 3 and array.shape[2] == 4 and path.suffix.lower() in (".jpg", ".jpeg"):
        raise InvalidInputError(f"{path}: JPEG has no alpha channel; write a .png or .webp")
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(array)).save(path)
    return path
