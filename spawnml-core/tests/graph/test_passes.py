"""Graph passes on small graphs: dead nodes, Conv+BatchNorm folding, activation fusion,
constant folding of shape arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, chain_model, chain_reference, make_model
from onnx import helper
from onnx.reference import ReferenceEvaluator

from spawnml import InferenceSession, hookimpl
from spawnml.graph import import_model
from spawnml.graph.export import to_model
from spawnml.graph.fusion import FUSED_ATTR, fused_activation
from spawnml.graph.passes import fold_conv_batchnorm, remove_dead_nodes
from spawnml.kernel import Helper, Output, Tensor, helper as kernel_helper, kernel
from spawnml.op import In, Lowering, OpDef, Out


def test_dead_nodes_are_removed() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Add", ["x", "w"], ["dead"]),
             helper.make_node("Relu", ["dead"], ["dead2"])]  # fmt: skip
    graph = import_model(make_model(nodes, [("x", F, [2])], [("y", F, [2])],
                                    {"w": np.ones(2, np.float32)}))  # fmt: skip
    assert remove_dead_nodes(graph) == 2
    assert [n.op_type for n in graph.nodes] == ["Relu"] and graph.initializers == {}


def _conv_bn_model() -> object:
    rng = np.random.default_rng(0)
    inits = {
        "W": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
        "B": rng.standard_normal(3).astype(np.float32),
        "scale": rng.uniform(0.5, 2, 3).astype(np.float32),
        "bias": rng.standard_normal(3).astype(np.float32),
        "mean": rng.standard_normal(3).astype(np.float32),
        "var": rng.uniform(0.5, 2, 3).astype(np.float32),
    }
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"],
                              epsilon=1e-3)]  # fmt: skip
    return make_model(nodes, [("x", F, [1, 2, 5, 5])], [("y", F, [1, 3, 5, 5])], inits)


def test_conv_batchnorm_folding_keeps_the_results() -> None:
    model = _conv_bn_model()
    graph = import_model(model)
    assert fold_conv_batchnorm(graph) == 1
    assert [n.op_type for n in graph.nodes] == ["Conv"]
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ReferenceEvaluator(to_model(graph)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv_batchnorm_not_folded_when_conv_output_is_shared() -> None:
    model = _conv_bn_model()
    model.graph.output.append(helper.make_tensor_value_info("c", F, [1, 3, 5, 5]))
    graph = import_model(model)
    assert fold_conv_batchnorm(graph) == 0


# -- activation fusion with a test-local op that opts in ------------------------------------


@kernel_helper
def _identity(v):
    return v


@kernel
def _scale2_act(x: Tensor, out: Output, fn: Helper):
    return fn(x.flat[out.flat] * 2.0)


class Scale2(OpDef):
    """y = 2x, applying a fused activation in the same kernel."""

    domain = "test.graph"
    op_type = "Scale2"
    fusable_activations = frozenset({"Relu"})
    launches = 0

    def infer(self, node, inputs, values):
        return [inputs[0]]

    def reference(self, node, inputs):
        return [inputs[0] * 2]

    def lower(self, node, inputs, outputs, values):
        found = fused_activation(node)
        fn = type(found[0]).fn if found else _identity
        low = Lowering()
        low.launch(_scale2_act, [In(0)], Out(0), fn=fn)
        return low


@pytest.fixture
def scale2(extra_plugin) -> None:
    @hookimpl
    def spawnml_register_ops(register):
        register(Scale2)

    extra_plugin(spawnml_register_ops=spawnml_register_ops)


def _scale_relu_model() -> object:
    nodes = [helper.make_node("Scale2", ["x"], ["s"], domain="test.graph"),
             helper.make_node("Relu", ["s"], ["y"])]  # fmt: skip
    model = make_model(nodes, [("x", F, [5])], [("y", F, [5])])
    model.opset_import.append(helper.make_opsetid("test.graph", 1))
    return model


def test_activation_fuses_into_the_producing_kernel(scale2) -> None:
    sess = InferenceSession(_scale_relu_model(), ["cpu"])
    assert sess.passes.activations_fused == 1
    assert list(sess.placement()) == ["Scale2_0"]
    assert sess.graph.nodes[0].attrs[FUSED_ATTR].op_type == "Relu"
    x = np.array([-2, -0.5, 0, 1, 3], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(2 * x, 0))


def test_fusion_off_keeps_both_nodes(scale2) -> None:
    sess = InferenceSession(_scale_relu_model(), ["cpu"], options={"optimize": False})
    assert list(sess.placement()) == ["Scale2_0", "Relu_1"]


def test_ops_that_do_not_opt_in_are_not_fused() -> None:
    sess = InferenceSession(chain_model(), ["cpu"])  # Sub does not declare fusable_activations
    assert sess.passes.activations_fused == 0


# -- constant folding of shape arithmetic ---------------------------------------------------


def test_shape_of_a_known_shape_folds_on_the_host() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Add", ["s", "s"], ["y"])]  # fmt: skip
    sess = InferenceSession(make_model(nodes, [("x", F, ["N", 3])], [("y", 7, [2])]), ["cpu"])
    (y,) = sess.run(None, {"x": np.ones((4, 3), np.float32)})
    np.testing.assert_array_equal(y, [8, 6])
    placement = sess.placement()
    assert placement.folded == 2 and placement.unused == 1 and list(placement) == []
    (y,) = sess.run(None, {"x": np.ones((5, 3), np.float32)})  # re-specialised
    np.testing.assert_array_equal(y, [10, 6])


def test_chain_reference_helper_sanity() -> None:
    x = np.array([[-5, 0, 0, 5]], np.float32)
    np.testing.assert_allclose(chain_reference(x), [[-5, 0, 0.3333333, 11]], rtol=1e-6)
