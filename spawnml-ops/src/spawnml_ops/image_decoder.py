"""ImageDecoder (opset 20): an encoded image (a 1-D uint8 tensor) to an (H, W, C) uint8
array, decoded on the host with Pillow (``pip install spawnml-ops[image]``).

The formats are the spec's: BMP, JPEG, JPEG 2000, PNG, PNM (PBM/PGM/PPM), TIFF and WebP,
decoded as onnx.reference decodes them (Pillow), so results match it exactly. ``RGB``
and ``BGR`` give 3 channels (an image stored as grey, palette or RGBA is converted to RGB
first, as the spec's output shape requires), ``Grayscale`` 1 (Pillow's ``L``, ITU-R 601-2
luma). A Pillow built without a format's codec (JPEG 2000 needs OpenJPEG, WebP libwebp)
raises UnsupportedOpError naming it; bytes that are no image of these formats raise
InvalidInputError. Multi-frame TIFF and WebP give their first frame.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, UnsupportedOpError
from spawnml.op import Node, OpCase, OpDef, TensorInfo

PIXEL_FORMATS = {"RGB": ("RGB", 3), "BGR": ("RGB", 3), "Grayscale": ("L", 1)}
FORMATS = {  # Pillow's format name -> the spec's
    "BMP": "BMP", "JPEG": "JPEG", "JPEG2000": "JPEG 2000", "PNG": "PNG", "PPM": "PNM",
    "TIFF": "TIFF", "WEBP": "WebP",
}  # fmt: skip
PILLOW_HINT = "ImageDecoder needs Pillow: pip install 'spawnml-ops[image]'"


def _pillow() -> Any:
    """PIL.Image, or UnsupportedOpError when Pillow is not installed."""
    try:
        import PIL.Image
    except ImportError as exc:
        raise UnsupportedOpError(PILLOW_HINT) from exc
    return PIL.Image


def _open(node: Node, data: bytes) -> Any:
    """The decoded first frame of ``data`` (a Pillow image in one of FORMATS)."""
    image_module = _pillow()
    try:
        image = image_module.open(io.BytesIO(data), formats=list(FORMATS))
        image.load()
    except image_module.UnidentifiedImageError as exc:
        raise InvalidInputError(f"{node.describe()}: the {len(data)}-byte stream is not an "
                                f"image in a supported format ({_format_list()})") from exc
    except OSError as exc:
        if "not available" in str(exc):  # "decoder jpeg2k not available"
            raise UnsupportedOpError(f"{node.describe()}: this Pillow cannot decode the "
                                     f"image: {exc}") from exc
        raise InvalidInputError(f"{node.describe()}: the image is corrupt: {exc}") from exc
    return image


def _format_list() -> str:
    return ", ".join(sorted(FORMATS.values()))


def decode(node: Node, encoded: np.ndarray, pixel_format: str) -> np.ndarray:
    """(H, W, C) uint8 pixels of an encoded image."""
    mode, _ = PIXEL_FORMATS[pixel_format]
    image = _open(node, np.ascontiguousarray(encoded, np.uint8).tobytes())
    pixels = np.asarray(image if image.mode == mode else image.convert(mode), np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    return np.ascontiguousarray(pixels[:, :, ::-1] if pixel_format == "BGR" else pixels)


class ImageDecoder(OpDef):
    """Decodes one image on the host: the output shape is the image's."""

    op_type = "ImageDecoder"
    since_version = 20
    host_only = True
    edge_values = False

    def pixel_format(self, node: Node) -> str:
        value = self.attr(node, "pixel_format", "RGB")
        if value not in PIXEL_FORMATS:
            raise self.fail(node, f"attribute 'pixel_format' must be one of "
                                  f"{sorted(PIXEL_FORMATS)}, got {value!r}")
        return str(value)

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if len(inputs) != 1 or inputs[0] is None:
            raise self.fail(node, "expects one input, the encoded stream")
        x = inputs[0]
        if x.dtype != DType.uint8:
            raise self.fail(node, f"the encoded stream must be uint8, got {x.dtype}")
        if x.shape is not None and len(x.shape) != 1:
            raise self.fail(node, f"the encoded stream must be 1-D, got shape {x.shape}")
        _, channels = PIXEL_FORMATS[self.pixel_format(node)]
        _pillow()
        return [TensorInfo(DType.uint8, (None, None, channels))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        return [decode(node, np.asarray(inputs[0]), self.pixel_format(node))]

    def cases(self) -> list[OpCase]:
        try:
            samples = encoded_samples()
        except UnsupportedOpError:
            return []  # no Pillow: nothing to encode the samples with
        return [OpCase(f"{fmt.lower()}_{pf.lower()}", [data], {"pixel_format": pf})
                for fmt, data in samples.items() for pf in PIXEL_FORMATS]


def encoded_samples(pixels: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``pixels`` (default: a seeded 12x10 checkerboard of random colours) encoded in each
    format this Pillow can write."""
    image_module = _pillow()
    if pixels is None:
        tiles = np.random.default_rng(0).integers(0, 256, (3, 3, 3), dtype=np.uint8)
        pixels = np.repeat(np.repeat(tiles, 4, axis=0), 4, axis=1)[:12, :10]
    out = {}
    for fmt in FORMATS:
        buffer = io.BytesIO()
        try:
            image_module.fromarray(pixels).save(buffer, format=fmt)
        except (OSError, KeyError):  # no encoder for the format in this Pillow
            continue
        out[fmt] = np.frombuffer(buffer.getvalue(), np.uint8).copy()
    return out


