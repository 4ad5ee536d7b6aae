"""An error raised in a (plugin) op's ``infer`` reaches the user naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import helper

from spawnml import InferenceSession, hookimpl
from spawnml.errors import InvalidModelError
from spawnml.op import OpDef


class BuggyInfer(OpDef):
    domain = "test.infer"
    op_type = "BuggyInfer"

    def infer(self, node, inputs, values):
        return [inputs[0].with_typo]  # an AttributeError: a bug in the plugin


class RejectingInfer(BuggyInfer):
    op_type = "RejectingInfer"

    def infer(self, node, inputs, values):
        raise self.fail(node, "attribute 'mode' is invalid")


@pytest.fixture
def ops(extra_plugin) -> None:
    @hookimpl
    def spawnml_register_ops(register):
        register(BuggyInfer)
        register(RejectingInfer())

    extra_plugin(spawnml_register_ops=spawnml_register_ops)


def _model(op_type: str) -> object:
    nodes = [helper.make_node(op_type, ["x"], ["y"], name="the_node", domain="test.infer")]
    model = make_model(nodes, [("x", F, [3])], [("y", F, [3])])
    model.opset_import.append(helper.make_opsetid("test.infer", 1))
    return model


def test_an_exception_in_infer_names_the_node(ops) -> None:
    with pytest.raises(InvalidModelError) as info:
        session = InferenceSession(_model("BuggyInfer"), backends=["cpu"])
        session.run(None, {"x": np.zeros(3, np.float32)})
    message = str(info.value)
    assert message.startswith("BuggyInfer node 'the_node': test.infer::BuggyInfer.infer raised "
                              "AttributeError:"), message
    assert isinstance(info.value.__cause__, AttributeError)


def test_a_spawnml_error_in_infer_is_left_as_it_is(ops) -> None:
    with pytest.raises(InvalidModelError, match=r"^RejectingInfer node 'the_node': attribute"):
        session = InferenceSession(_model("RejectingInfer"), backends=["cpu"])
        session.run(None, {"x": np.zeros(3, np.float32)})
