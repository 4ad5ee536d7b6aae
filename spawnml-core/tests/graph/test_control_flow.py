"""If and Loop: host-orchestrated, bodies run as graphs of their own on the backends."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper

from spawnml import InferenceSession, InvalidModelError


def _if_model() -> object:
    # then: y = Relu(x + b) (b from the outer scope); else: y = x + x
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["ty"])],
        "then", [], [helper.make_tensor_value_info("ty", F, [3])])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["ey"])], "else", [],
                               [helper.make_tensor_value_info("ey", F, [3])])  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    return make_model([node], [("c", TensorProto.BOOL, []), ("x", F, [3])], [("y", F, [3])],
                      {"b": np.array([-1, 0, 1], np.float32)})  # fmt: skip


@pytest.mark.parametrize("cond", [True, False])
def test_if_runs_the_chosen_branch_with_outer_values(cond: bool) -> None:
    sess = InferenceSession(_if_model(), ["cpu"])
    x = np.array([0.5, -2, 3], np.float32)
    (y,) = sess.run(None, {"c": np.array(cond), "x": x})
    want = np.maximum(x + np.array([-1, 0, 1], np.float32), 0) if cond else 2 * x
    np.testing.assert_allclose(y, want)
    assert sess.placement().kinds["If_0"] == "control"


def _loop_model(with_trip: bool = True) -> object:
    # acc_out = acc_in + x (outer) ; scan = Relu(acc_out)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Relu", ["acc_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", F, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [2]),
         helper.make_tensor_value_info("scan", F, [2])],
    )  # fmt: skip
    ins = ["M" if with_trip else "", "", "acc0"]
    node = helper.make_node("Loop", ins, ["acc", "scans"], body=body)
    inputs = [("M", TensorProto.INT64, []), ("acc0", F, [2]), ("x", F, [2])]
    if not with_trip:
        inputs = inputs[1:]
    return make_model([node], inputs, [("acc", F, [2]), ("scans", F, [None, 2])])


def test_loop_carries_values_and_stacks_scan_outputs() -> None:
    sess = InferenceSession(_loop_model(), ["cpu"])
    acc0, x = np.array([-3, 1], np.float32), np.array([1, -1], np.float32)
    acc, scans = sess.run(None, {"M": np.array(4, np.int64), "acc0": acc0, "x": x})
    np.testing.assert_allclose(acc, acc0 + 4 * x)
    np.testing.assert_allclose(scans, [np.maximum(acc0 + k * x, 0) for k in range(1, 5)])
    acc, scans = sess.run(None, {"M": np.array(0, np.int64), "acc0": acc0, "x": x})
    np.testing.assert_allclose(acc, acc0)
    assert scans.shape == (0, 2)


def test_loop_without_trip_count_or_condition_is_refused() -> None:
    sess = InferenceSession(_loop_model(with_trip=False), ["cpu"])
    with pytest.raises(InvalidModelError, match="never end"):
        sess.run(None, {"acc0": np.zeros(2, np.float32), "x": np.ones(2, np.float32)})
