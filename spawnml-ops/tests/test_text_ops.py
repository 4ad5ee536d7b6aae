"""String ops, TfIdfVectorizer, MelWeightMatrix and string Cast/Equal: declared cases
against onnxruntime and onnx.reference, sessions with string feeds on the host, and bad
inputs that must raise spawnml errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from family_check import check_reference, family_cases
from onnx import TensorProto, helper
from ort_cases import assert_matches_onnxruntime

import spawnml
from spawnml import InferenceSession
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.op import HostOnly
from spawnml_ops import text
from spawnml_ops.mel import MelWeightMatrix

CASES = family_cases([*text.OPS, MelWeightMatrix])
# onnxruntime needs an en_US locale for StringNormalizer, which CI images may lack.
ORT_GAPS = {"StringNormalizer"}
REFERENCE_GAPS = {
    ("StringNormalizer", "lower_stop_insensitive"): "splits elements into words",
    ("StringNormalizer", "upper_stop_sensitive"): "splits elements into words",
    ("StringNormalizer", "all_removed"): "splits elements into words",
    ("StringSplit", "comma"): "one empty substring for an empty string (onnxruntime: none)",
    ("StringSplit", "comma_maxsplit"): "one empty substring for an empty string",
    ("TfIdfVectorizer", "int_idf"): "fails on IDF without weights (len(None))",
}


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnxruntime(op, case) -> None:
    if op.op_type in ORT_GAPS:
        pytest.skip("onnxruntime's StringNormalizer needs the en_US.UTF-8 locale")
    assert_matches_onnxruntime(op, case, case.opset or 21)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx_reference(op, case) -> None:
    check_reference(op, case, REFERENCE_GAPS)


def _model(nodes, inputs, outputs, opset: int = 21) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


@pytest.mark.parametrize("backend", ["cpu", "wasm", "webgpu"])
def test_a_string_graph_runs_on_the_host_next_to_device_ops(backend: str) -> None:
    if backend not in spawnml.get_available_backends():
        pytest.skip(f"backend {backend} is not available here")
    s = TensorProto.STRING
    model = _model(
        [helper.make_node("StringConcat", ["x", "y"], ["xy"]),
         helper.make_node("Equal", ["xy", "x"], ["same"]),
         helper.make_node("Cast", ["same"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Relu", ["f"], ["r"]),
         helper.make_node("Cast", ["r"], ["text"], to=s),
         helper.make_node("Reshape", ["text", "shape"], ["flat"])],
        [helper.make_tensor_value_info("x", s, [2, 2]), helper.make_tensor_value_info("y", s, [])],
        [helper.make_tensor_value_info("flat", s, None),
         helper.make_tensor_value_info("xy", s, None)])
    onnx_model = onnx.load_from_string(model)
    onnx_model.graph.initializer.append(helper.make_tensor("shape", TensorProto.INT64, [1], [4]))
    sess = InferenceSession(onnx_model.SerializeToString(), backends=[backend], strict=True)
    x = np.array([["a", "bé"], ["", "c"]], dtype=object)
    flat, xy = sess.run(None, {"x": x, "y": np.array("", dtype=object)})
    assert xy.tolist() == x.tolist() and flat.dtype == object
    assert flat.tolist() == ["1", "1", "1", "1"]
    kinds = sess.placement()
    assert kinds["Relu_3"] == backend and kinds["StringConcat_0"] == "host"
    assert sess.get_inputs()[0].type == "tensor(string)"


def test_numpy_unicode_and_bytes_feeds_become_str_objects() -> None:
    s = TensorProto.STRING
    model = _model([helper.make_node("StringConcat", ["x", "x"], ["y"])],
                   [helper.make_tensor_value_info("x", s, [2])],
                   [helper.make_tensor_value_info("y", s, [2])])
    sess = InferenceSession(model, backends=["cpu"])
    (y,) = sess.run(None, {"x": np.array(["ab", "c"])})
    assert y.dtype == object and y.tolist() == ["abab", "cc"]
    (y,) = sess.run(None, {"x": np.array([b"d", "é".encode()], dtype=object)})
    assert y.tolist() == ["dd", "éé"]


def test_a_float_input_to_a_string_op_is_refused() -> None:
    model = _model([helper.make_node("StringSplit", ["x"], ["y", "n"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.STRING, None),
                    helper.make_tensor_value_info("n", TensorProto.INT64, None)])
    with pytest.raises(InvalidModelError, match=r"StringSplit node .*must be a string tensor"):
        InferenceSession(model, backends=["cpu"]).run(None, {"x": np.zeros(2, np.float32)})


def test_a_number_fed_to_a_string_input_is_refused() -> None:
    model = _model([helper.make_node("Identity", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    sess = InferenceSession(model, backends=["cpu"])
    with pytest.raises(InvalidInputError, match="expected dtype tensor\\(string\\)"):
        sess.run(None, {"x": np.zeros(2, np.float32)})
    with pytest.raises(InvalidInputError, match="object arrays are not tensors unless"):
        sess.run(None, {"x": np.array([1, "a"], dtype=object)})


@pytest.mark.parametrize(("op_type", "attrs", "match"), [
    ("StringNormalizer", {"case_change_action": "TITLE"}, "case_change_action must be one of"),
    ("RegexFullMatch", {"pattern": "(unclosed"}, "is not a valid regular expression"),
    ("StringSplit", {"maxsplit": -2}, "maxsplit must be >= 0"),
])
def test_bad_attributes_are_reported_with_the_node(op_type, attrs, match) -> None:
    outs = ["y", "n"] if op_type == "StringSplit" else ["y"]
    model = _model([helper.make_node(op_type, ["x"], outs, name="bad", **attrs)],
                   [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info(o, 0, None) for o in outs])
    with pytest.raises(InvalidModelError, match=f"{op_type} node 'bad'.*{match}"):
        InferenceSession(model, backends=["cpu"]).run(
            None, {"x": np.array(["a", "b"], dtype=object)})


def test_a_string_that_is_no_number_fails_the_cast() -> None:
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64, name="c")],
                   [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    with pytest.raises(InvalidInputError, match=r"Cast node 'c': element 1 \('x1'\)"):
        InferenceSession(model, backends=["cpu"]).run(
            None, {"x": np.array(["12", "x1"], dtype=object)})


def test_no_device_stores_strings() -> None:
    backend = spawnml.get_backend("cpu")
    with pytest.raises(HostOnly, match="stores no string tensors"):
        backend.storage_dtype(DType.string)
    with pytest.raises(HostOnly, match="stores no string tensors"):
        backend.upload(np.array(["a"], dtype=object))
