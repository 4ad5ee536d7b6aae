"""Conv and ConvTranspose: every declared case on cpu and webgpu against the op's numpy
reference, the reference against onnx.reference, and attribute validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

import spawnml
from spawnml.errors import InvalidModelError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import conv
from spawnml_ops.conv import Conv, ConvTranspose

CASES = family_cases(conv.OPS)
GAPS = {
    ("ConvTranspose", "convT2d_dilations_groups"):
        "its grouped path fails with one output channel per group (official group tests pass)",
}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def _node(op_type: str, attrs: dict, n_in: int = 2) -> Node:
    return Node(op_type, [f"x{i}" for i in range(n_in)], ["y"], attrs, name="c1", opset=21)


@pytest.mark.parametrize("attrs,pattern", [
    ({"strides": (1,)}, "'strides' has 1 values"),
    ({"dilations": (0, 1)}, "'dilations'"),
    ({"pads": (1, 1, -1, 0)}, "'pads'"),
    ({"auto_pad": "SAME"}, "'auto_pad'"),
    ({"auto_pad": "VALID", "pads": (1, 1, 1, 1)}, "'pads' and 'auto_pad'"),
    ({"group": 3}, "'group'"),
    ({"kernel_shape": (2, 2)}, "'kernel_shape'"),
])
def test_conv_attribute_errors_name_node_and_attribute(attrs, pattern) -> None:
    x, w = np.zeros((1, 2, 5, 5), np.float32), np.zeros((2, 2, 3, 3), np.float32)
    with pytest.raises(InvalidModelError, match=f"c1.*{pattern}"):
        run_node(spawnml.get_backend("cpu"), Conv(), _node("Conv", attrs), [x, w])


def test_conv_transpose_output_padding_must_be_smaller_than_stride() -> None:
    x, w = np.zeros((1, 1, 3, 3), np.float32), np.zeros((1, 1, 3, 3), np.float32)
    node = _node("ConvTranspose", {"strides": (2, 2), "output_padding": (2, 0)})
    with pytest.raises(InvalidModelError, match=r"c1.*'output_padding'"):
        run_node(spawnml.get_backend("cpu"), ConvTranspose(), node, [x, w])


def test_conv_matches_direct_loop_definition() -> None:
    """An independent check of the reference: the textbook triple loop."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 3)).astype(np.float32)
    node = _node("Conv", {"pads": (1, 0, 0, 2), "strides": (2, 1), "dilations": (1, 2)})
    (y,) = run_node(spawnml.get_backend("cpu"), Conv(), node, [x, w])
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 0), (0, 2)])
    want = np.zeros(y.shape)
    for o in range(3):
        for i in range(y.shape[2]):
            for j in range(y.shape[3]):
                patch = xp[0, :, i * 2: i * 2 + 2, j: j + 5: 2]
                want[0, o, i, j] = (patch * w[o]).sum()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def _pointwise_model(group: int) -> tuple[bytes, dict[str, np.ndarray]]:
    """Sigmoid -> 1x1 Conv (bias, fused Relu) -> Add of a residual, on a 7x5 image: the conv
    reads its input through a (N, C, H*W) view with a fused producer and consumer."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 4 // group, 1, 1)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Conv", ["s", "w", "b"], ["c"], group=group),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["r", "res"], ["y"])]
    graph = helper.make_graph(
        nodes, "pointwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 7, 5]),
         helper.make_tensor_value_info("res", TensorProto.FLOAT, [2, 6, 7, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 7, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal((2, 4, 7, 5)).astype(np.float32),
             "res": rng.standard_normal((2, 6, 7, 5)).astype(np.float32)}
    return model.SerializeToString(), feeds


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("backend", [b for b in ("cpu", "opencl", "wasm", "webgpu", "webgl")
                                     if b in spawnml.get_available_backends()])
def test_pointwise_conv_viewed_flat_fuses_and_matches_onnxruntime(backend, group,
                                                                  monkeypatch) -> None:
    ort = pytest.importorskip("onnxruntime")
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")  # the portable kernels on cpu too
    model, feeds = _pointwise_model(group)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with spawnml.InferenceSession(model, backends=[backend]) as sess:
        np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5)


def test_a_view_must_keep_the_tensors_size() -> None:
    from spawnml.op import In, Launch, Out, TensorInfo

    launch = Launch(conv.conv_pointwise, [In(0)], Out(0), shapes=((2, 3, 5), None))
    info = TensorInfo(spawnml.DType.float32, (2, 3, 2, 2))
    with pytest.raises(InvalidModelError, match="a view of shape"):
        launch.viewed([info, info])
    ok = TensorInfo(spawnml.DType.float32, (2, 3, 5, 1))
    assert launch.viewed([ok, info])[0].shape == (2, 3, 5)
