"""The example op plugin's own tests: its cases on every backend (the op kit), a model using
the op end to end, and a bad attribute reported with the node's name."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import spawnml
from spawnml.errors import SpawnMLError
from spawnml_conformance.op_kit import OpConformance


class TestSwish(OpConformance):
    ops = ("com.example::Swish",)  # every case of the op on every available backend


def swish_model(**attrs) -> bytes:
    node = helper.make_node("Swish", ["x"], ["y"], name="my_swish", domain="com.example",
                            **attrs)
    graph = helper.make_graph(
        [node], "swish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.example", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def test_a_model_using_the_op_runs_on_cpu() -> None:
    x = np.array([[-3.0, -0.5, 0.0], [0.5, 2.0, 8.0]], np.float32)
    session = spawnml.InferenceSession(swish_model(alpha=2.0), backends=["cpu"])
    (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, x / (1.0 + np.exp(-2.0 * x)), rtol=1e-6, atol=1e-7)


def test_a_bad_attribute_is_reported_with_the_node() -> None:
    with pytest.raises(SpawnMLError, match=r"Swish node 'my_swish'.*'alpha'"):
        session = spawnml.InferenceSession(swish_model(alpha="fast"), backends=["cpu"])
        session.run(None, {"x": np.zeros((2, 3), np.float32)})


def test_the_op_is_registered_through_the_entry_point() -> None:
    from spawnml.registry import find_op

    assert type(find_op("com.example", "Swish", 1)).__module__ == "spawnml_ops_example.swish"
