"""ImageDecoder: every format and pixel format equal (exactly) to onnx.reference through an
InferenceSession (the op is host-only: the backend only hosts the session); images that are
not RGB decode to the spec's 3 channels; bad streams and attributes raise spawnml errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto, helper

import spawnml
from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops.image_decoder import FORMATS, PIXEL_FORMATS, ImageDecoder, encoded_samples

PIL = pytest.importorskip("PIL.Image")
SAMPLES = encoded_samples()


def _model(pixel_format: str, dtype: int = TensorProto.UINT8):
    x = helper.make_tensor_value_info("x", dtype, [None])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
    node = helper.make_node("ImageDecoder", ["x"], ["y"], name="dec", pixel_format=pixel_format)
    return helper.make_model(helper.make_graph([node], "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 20)])


def _decode(data: np.ndarray, pixel_format: str = "RGB") -> np.ndarray:
    node = Node("ImageDecoder", ["x"], ["y"], {"pixel_format": pixel_format}, name="dec",
                opset=20)
    return run_node(spawnml.get_backend("cpu"), ImageDecoder(), node, [data])[0]


def test_every_spec_format_is_written_by_this_pillow() -> None:
    assert sorted(SAMPLES) == sorted(FORMATS)


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
@pytest.mark.parametrize("pixel_format", sorted(PIXEL_FORMATS))
def test_decoding_equals_onnx_reference(fmt: str, pixel_format: str) -> None:
    from onnx.reference import ReferenceEvaluator

    model = _model(pixel_format)
    feed = {"x": SAMPLES[fmt]}
    (expected,) = ReferenceEvaluator(model).run(None, feed)
    session = spawnml.InferenceSession(model.SerializeToString(), backends=["cpu"])
    (got,) = session.run(None, feed)
    assert got.dtype == np.uint8 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("mode", "shape"), [("L", (6, 7)), ("RGBA", (6, 7, 4))])
def test_images_that_are_not_rgb_decode_to_three_channels(mode: str, shape: tuple) -> None:
    pixels = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    buffer = io.BytesIO()
    PIL.fromarray(pixels, mode).save(buffer, format="PNG")
    data = np.frombuffer(buffer.getvalue(), np.uint8)
    rgb = _decode(data)
    expected = np.asarray(PIL.fromarray(pixels, mode).convert("RGB"))
    np.testing.assert_array_equal(rgb, expected)
    assert _decode(data, "BGR").shape == (6, 7, 3)
    assert _decode(data, "Grayscale").shape == (6, 7, 1)


def test_a_corrupt_or_unsupported_stream_is_an_input_error() -> None:
    with pytest.raises(InvalidInputError, match=r"ImageDecoder node 'dec'.*not an image"):
        _decode(np.frombuffer(b"definitely not an image", np.uint8))
    gif = io.BytesIO()
    PIL.new("RGB", (4, 4)).save(gif, format="GIF")
    with pytest.raises(InvalidInputError, match="BMP, JPEG"):
        _decode(np.frombuffer(gif.getvalue(), np.uint8))
    truncated = SAMPLES["PNG"][: len(SAMPLES["PNG"]) // 2]
    with pytest.raises(InvalidInputError, match="corrupt"):
        _decode(truncated)


@pytest.mark.parametrize(("pixel_format", "dtype", "match"), [
    ("RGBA", np.uint8, "'pixel_format' must be one of"),
    ("RGB", np.int8, "must be uint8"),
])
def test_invalid_models_are_rejected(pixel_format: str, dtype: type, match: str) -> None:
    model = _model(pixel_format, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    session = spawnml.InferenceSession(model.SerializeToString(), backends=["cpu"])
    with pytest.raises(InvalidModelError, match=rf"ImageDecoder node 'dec'.*{match}"):
        session.run(None, {"x": SAMPLES["PNG"].astype(dtype)})
