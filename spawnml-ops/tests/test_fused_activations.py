"""Activations fused into Conv (graph.fusion): every backend applies them in the conv kernel
and matches onnxruntime on the unfused model; constants-only Clip bounds fuse, others do not;
export expands fused nodes back into a valid model."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, checker, helper, numpy_helper

from spawnml import InferenceSession
from spawnml.graph.export import to_model
from spawnml.graph.fusion import FUSED_ATTR
from spawnml.testing.op_check import backend_or_skip

BACKENDS = ["cpu", "opencl", "webgpu", "webgl", "wasm"]
RNG = np.random.default_rng(7)
W = RNG.standard_normal((6, 4, 3, 3)).astype(np.float32)
B = RNG.standard_normal(6).astype(np.float32)
X = (3 * RNG.standard_normal((1, 4, 7, 8))).astype(np.float32)

# activation node (reading "c", writing "y") and the extra initializers it needs
ACTIVATIONS = {
    "relu": (helper.make_node("Relu", ["c"], ["y"]), {}),
    "relu6": (helper.make_node("Clip", ["c", "lo", "hi"], ["y"]), {"lo": 0.0, "hi": 6.0}),
    "clip_max_only": (helper.make_node("Clip", ["c", "", "hi"], ["y"]), {"hi": 0.5}),
    "leaky_relu": (helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.3), {}),
    "hard_sigmoid": (helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4), {}),
    "hard_swish": (helper.make_node("HardSwish", ["c"], ["y"]), {}),
    "sigmoid": (helper.make_node("Sigmoid", ["c"], ["y"]), {}),
}


def conv_then(activation: str, group: int = 1, inputs: tuple[str, ...] = ()) -> object:
    act, consts = ACTIVATIONS[activation]
    w = W if group == 1 else RNG.standard_normal((4, 1, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W")]
    inits += [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()
              if k not in inputs]  # fmt: skip
    conv = helper.make_node("Conv", ["x", "W"] + (["B"] if group == 1 else []), ["c"],
                            pads=[1, 1, 1, 1], strides=[1, 2], group=group)  # fmt: skip
    if group == 1:
        inits.append(numpy_helper.from_array(B, "B"))
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))]
    graph_inputs += [helper.make_tensor_value_info(k, TensorProto.FLOAT, []) for k in inputs]
    graph = helper.make_graph(
        [conv, act], "g", graph_inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, w.shape[0], 7, 4])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def expected(model: object, feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("group", [1, 4], ids=["dense", "depthwise"])
def test_conv_applies_the_fused_activation(backend: str, activation: str, group: int) -> None:
    backend_or_skip(backend)
    model = conv_then(activation, group)
    sess = InferenceSession(model, [backend])
    assert sess.passes.activations_fused == 1
    assert dict(sess.placement()) == {sess.graph.nodes[0].name: backend}
    got = sess.run(None, {"x": X})[0]
    np.testing.assert_allclose(got, expected(model, {"x": X}), rtol=1e-5, atol=2e-5)


def test_clip_bounds_fed_at_run_time_are_not_fused() -> None:
    model = conv_then("relu6", inputs=("hi",))
    sess = InferenceSession(model, ["cpu"])
    assert sess.passes.activations_fused == 0
    feeds = {"x": X, "hi": np.array(1.5, np.float32)}
    np.testing.assert_allclose(sess.run(None, feeds)[0], expected(model, feeds), atol=2e-5)


def test_export_expands_a_fused_clip_with_its_bounds() -> None:
    sess = InferenceSession(conv_then("relu6"), ["cpu"])
    fused = sess.graph.nodes[0].attrs[FUSED_ATTR]
    assert (fused.op_type, [name for name, _ in fused.constants]) == ("Clip", ["lo", "hi"])
    exported = to_model(sess.graph)
    checker.check_model(exported)
    assert [n.op_type for n in exported.graph.node] == ["Conv", "Clip"]
    np.testing.assert_allclose(
        expected(exported, {"x": X}), expected(conv_then("relu6"), {"x": X}), atol=1e-6
    )


def add_then_relu(dtype: int, shape_b: list[int]) -> object:
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", dtype, [2, 3, 4]),
         helper.make_tensor_value_info("b", dtype, shape_b)],
        [helper.make_tensor_value_info("y", dtype, [2, 3, 4])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_residual_add_applies_a_fused_relu(backend: str, dtype: type) -> None:
    backend_or_skip(backend)
    model = add_then_relu(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [3, 1])
    feeds = {"a": (10 * RNG.standard_normal((2, 3, 4))).astype(dtype),
             "b": (10 * RNG.standard_normal((3, 1))).astype(dtype)}  # fmt: skip
    sess = InferenceSession(model, [backend])
    assert sess.passes.activations_fused == 1
    assert dict(sess.placement()) == {sess.graph.nodes[0].name: backend}
    np.testing.assert_allclose(sess.run(None, feeds)[0], expected(model, feeds), atol=1e-6)


def contraction_then_relu(op: str, dtype: int, attrs: dict) -> object:
    inputs = ["a", "b", "c"] if op == "Gemm" else ["a", "b"]
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["s"], **attrs), helper.make_node("Relu", ["s"], ["y"])],
        "g",
        [helper.make_tensor_value_info(n, dtype, s)
         for n, s in zip(inputs, ([3, 4], [4, 5], [5]))],
        [helper.make_tensor_value_info("y", dtype, [3, 5])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,dtype,attrs", [
    ("MatMul", np.float32, {}),
    ("MatMul", np.int32, {}),
    ("Gemm", np.float32, {"alpha": 0.5, "beta": 2.0}),
])  # fmt: skip
def test_gemm_and_matmul_apply_a_fused_relu(backend: str, op: str, dtype: type, attrs) -> None:
    backend_or_skip(backend)
    model = contraction_then_relu(op, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), attrs)
    names = {i.name for i in model.graph.input}
    feeds = {n: (4 * RNG.standard_normal(s)).astype(dtype)
             for n, s in zip("abc", ([3, 4], [4, 5], [5])) if n in names}  # fmt: skip
    sess = InferenceSession(model, [backend])
    assert sess.passes.activations_fused == 1
    assert dict(sess.placement()) == {sess.graph.nodes[0].name: backend}
    got = sess.run(None, feeds)[0]
    np.testing.assert_allclose(got, expected(model, feeds), rtol=1e-5, atol=1e-5)
    assert (got >= 0).all()
