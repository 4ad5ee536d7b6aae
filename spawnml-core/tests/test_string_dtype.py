"""The string element type: DType mappings, feeds, initializers and Constant values of
ONNX STRING, and the onnx.backend adapter with string inputs (all on the host)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession
from spawnml.dtypes import DType, as_string_array, dtype
from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.onnx_backend import SpawnMLBackend


def test_string_maps_to_onnx_and_numpy() -> None:
    assert dtype(TensorProto.STRING) is DType.string and DType.string.onnx == 8
    assert DType.string.numpy == np.dtype(object) and DType.string.is_string
    assert DType.string.onnx_type_name == "tensor(string)"
    for np_dtype in (np.dtype(object), np.dtype("<U3"), np.dtype("S2")):
        assert dtype(np_dtype) is DType.string


def test_as_string_array_decodes_bytes_and_refuses_other_objects() -> None:
    out = as_string_array(np.array([b"a", "\u00e9"], dtype=object))
    assert out.dtype == object and out.tolist() == ["a", "\u00e9"]
    with pytest.raises(InvalidInputError, match="element 1 is int"):
        as_string_array(np.array(["a", 3], dtype=object), "x")
    with pytest.raises(InvalidInputError, match="not valid UTF-8"):
        as_string_array(np.array([b"\xff"], dtype=object))


def _identity_model(initializer: bool) -> onnx.ModelProto:
    s = TensorProto.STRING
    words = np.array(["x", "y\u00e9"], dtype=object)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(words)),
             helper.make_node("Concat", ["c", "w" if initializer else "c"], ["y"], axis=0)]
    inits = [numpy_helper.from_array(words, "w")] if initializer else []
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", s, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("initializer", [False, True])
def test_string_constants_and_initializers_import(initializer: bool) -> None:
    sess = InferenceSession(_identity_model(initializer).SerializeToString(), backends=["cpu"])
    (y,) = sess.run(None, {})
    assert y.dtype == object and y.tolist() == ["x", "y\u00e9", "x", "y\u00e9"]
    assert sess.get_outputs()[0].type == "tensor(string)"


def test_a_string_initializer_in_raw_data_is_refused() -> None:
    model = _identity_model(True)
    t = model.graph.initializer[0]
    t.ClearField("string_data")
    t.raw_data = b"xy"
    with pytest.raises(InvalidModelError, match="STRING tensor must hold its values in string"):
        InferenceSession(model.SerializeToString(), backends=["cpu"])


def test_onnx_backend_runs_string_nodes() -> None:
    node = helper.make_node("Identity", ["x"], ["y"])
    (y,) = SpawnMLBackend.run_node(node, [np.array(["a", "b"], dtype=object)])
    assert y.tolist() == ["a", "b"]


def test_a_repeated_identical_opset_import_is_accepted() -> None:
    model = _identity_model(False)
    model.opset_import.add(domain="", version=18)  # skl2onnx writes such a repeat
    InferenceSession(model.SerializeToString(), backends=["cpu"])
    model.opset_import.add(domain="", version=17)
    with pytest.raises(InvalidModelError, match="more than once"):
        InferenceSession(model.SerializeToString(), backends=["cpu"])
