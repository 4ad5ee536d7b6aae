"""Bad feeds, bad model bytes and external-data traversal: each raises the documented
exception with a message naming the problem (never a crash or a hang)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from graph_helpers import F, chain_model, make_model
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession, InvalidInputError, InvalidModelError, UnsupportedOpError


@pytest.fixture(scope="module")
def sess() -> InferenceSession:
    return InferenceSession(chain_model(shape=("N", 4)), ["cpu"])


FEEDS = [
    ({}, "missing input"),
    ({"x": np.ones((1, 4), np.float32), "z": np.ones(1)}, "unknown input name(s) ['z']"),
    ({"X": np.ones((1, 4), np.float32)}, "unknown input name(s) ['X']"),
    ({"x": np.ones((1, 4), np.float64)}, "expected dtype tensor(float), got tensor(double)"),
    ({"x": np.ones((1, 4), np.int64)}, "expected dtype tensor(float), got tensor(int64)"),
    ({"x": np.ones(4, np.float32)}, "expected rank 2"),
    ({"x": np.ones((1, 1, 4), np.float32)}, "expected rank 2"),
    ({"x": np.ones((1, 5), np.float32)}, "dimension 1 must be 4"),
    ({"x": np.array([["a"] * 4])}, "input 'x'"),
    ({"x": np.array([[object()] * 4])}, "object arrays are not tensors"),
]


@pytest.mark.parametrize(("feed", "message"), FEEDS)
def test_bad_feed(sess: InferenceSession, feed: dict, message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        sess.run(None, feed)
    assert message in str(info.value)


def test_feed_not_a_dict(sess: InferenceSession) -> None:
    with pytest.raises(InvalidInputError, match="feed must be a dict"):
        sess.run(None, [np.ones((1, 4), np.float32)])  # type: ignore[arg-type]


def test_unknown_output_name(sess: InferenceSession) -> None:
    with pytest.raises(InvalidInputError, match=r"unknown output name\(s\) \['nope'\]"):
        sess.run(["nope"], {"x": np.ones((1, 4), np.float32)})


def test_symbolic_dim_must_agree_across_inputs() -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = make_model(nodes, [("a", F, ["N"]), ("b", F, ["N"])], [("y", F, ["N"])])
    with pytest.raises(InvalidInputError, match="'N'"):
        InferenceSession(model, ["cpu"]).run(None, {"a": np.ones(2, np.float32),
                                                    "b": np.ones(3, np.float32)})  # fmt: skip


GOOD = chain_model().SerializeToString()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (GOOD[: len(GOOD) // 2], "truncated or malformed"),
        (b"\xff" * 64, "truncated or malformed"),
        (b"hello, I am not a model", "model"),
    ],
)
def test_bad_model_bytes(data: bytes, message: str) -> None:
    with pytest.raises(InvalidModelError, match=message):
        InferenceSession(data, ["cpu"])


def test_missing_model_file(tmp_path) -> None:
    with pytest.raises(InvalidModelError, match="does not exist"):
        InferenceSession(str(tmp_path / "nope.onnx"), ["cpu"])


def test_missing_initializer() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    with pytest.raises(InvalidModelError, match="reads 'w'"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("y", F, [2])]), ["cpu"])


def test_cycle() -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["a"], ["y"])]  # fmt: skip
    with pytest.raises(InvalidModelError, match="cycle"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("y", F, [2])]), ["cpu"])


def test_unknown_domain() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], domain="com.example")]
    with pytest.raises(InvalidModelError, match=r"com\.example"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("y", F, [2])]), ["cpu"])


def test_unknown_op_names_the_node() -> None:
    nodes = [helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")]
    with pytest.raises(UnsupportedOpError, match=r"mystery.*NoSuchOp"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("y", F, [2])]), ["cpu"])


def test_output_nothing_computes() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(InvalidModelError, match="output 'z'"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("z", F, [2])]), ["cpu"])


def test_value_defined_twice() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(InvalidModelError, match="defined more than once"):
        InferenceSession(make_model(nodes, [("x", F, [2])], [("y", F, [2])]), ["cpu"])


def test_bad_shapes_name_the_node() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="adder")]
    model = make_model(nodes, [("x", F, [3])], [("y", F, [3])], {"w": np.ones(2, np.float32)})
    with pytest.raises(InvalidModelError, match="adder"):
        InferenceSession(model, ["cpu"])


# -- external data ------------------------------------------------------------------------


def _external_model(tmp_path, location: str, length: int = 16) -> str:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.ClearField("float_data")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": "0", "length": str(length)}.items():
        entry = w.external_data.add()
        entry.key, entry.value = k, v
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    model = make_model(nodes, [("x", F, [4])], [("y", F, [4])])
    model.graph.initializer.append(w)
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    path = folder / "m.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_external_data_inside_the_folder_loads(tmp_path) -> None:
    path = _external_model(tmp_path, "weights.bin")
    (tmp_path / "model" / "weights.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (y,) = InferenceSession(path, ["cpu"]).run(None, {"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("../secret.bin", "escapes the model's folder"),
        ("sub/../../secret.bin", "escapes the model's folder"),
        ("/etc/passwd", "absolute path"),
        ("missing.bin", "does not exist"),
    ],
)
def test_external_data_traversal_is_refused(tmp_path, location: str, message: str) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    path = _external_model(tmp_path, location)
    with pytest.raises(InvalidModelError, match=message):
        InferenceSession(path, ["cpu"])


def test_external_data_symlink_out_of_the_folder(tmp_path) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    path = _external_model(tmp_path, "link.bin")
    (tmp_path / "model" / "link.bin").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(InvalidModelError, match="resolves outside"):
        InferenceSession(path, ["cpu"])


def test_external_data_range_past_the_file(tmp_path) -> None:
    path = _external_model(tmp_path, "weights.bin", length=16)
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 8)
    with pytest.raises(InvalidModelError, match="outside"):
        InferenceSession(path, ["cpu"])


def test_external_data_from_bytes_is_refused(tmp_path) -> None:
    path = _external_model(tmp_path, "weights.bin")
    with open(path, "rb") as f:
        data = f.read()
    with pytest.raises(InvalidModelError, match="given as bytes"):
        InferenceSession(data, ["cpu"])
