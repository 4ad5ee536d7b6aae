"""The cpu backend's BLAS/numpy kernels against onnx.reference, and against the portable
lowering where spawnml-ops implements the op (both paths must agree)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from spawnml import get_backend
from spawnml.dtypes import dtype as as_dtype
from spawnml.errors import SpawnMLError
from spawnml.execute import run_node
from spawnml.graph.fusion import FUSED_ATTR, FusedActivation
from spawnml.onnx_attributes import node_from_proto
from spawnml.op import TensorInfo
from spawnml.registry import find_op
from spawnml.tensor import DeviceTensor
from spawnml_backend_cpu import fast_kernels, fast_layout, fast_norms

RNG = np.random.default_rng(1234)
ALL = [*fast_kernels.KERNELS, *fast_norms.KERNELS, *fast_layout.KERNELS]


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@dataclass
class Case:
    name: str
    op: str
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 17
    constant: tuple[int, ...] = ()  # inputs whose values the planner knows (initializers)
    truth: str = "onnx"  # "ort" where onnx.reference is wrong (noted at the case)


CASES = [
    Case(
        "conv3x3_pad_bias",
        "Conv",
        [rand(1, 3, 9, 8), rand(5, 3, 3, 3), rand(5)],
        {"pads": [1, 1, 1, 1]},
        constant=(1, 2),
    ),
    Case(
        "conv_stride2_asym_pads",
        "Conv",
        [rand(2, 4, 11, 10), rand(6, 4, 3, 3)],
        {"strides": [2, 2], "pads": [0, 1, 1, 0]},
    ),
    Case(
        "conv_dilated",
        "Conv",
        [rand(1, 2, 12, 12), rand(3, 2, 3, 3), rand(3)],
        {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
    ),
    Case(
        "conv_rect_kernel_strides",
        "Conv",
        [rand(1, 3, 10, 13), rand(4, 3, 2, 5)],
        {"strides": [3, 2], "pads": [1, 0, 0, 2]},
    ),
    Case(
        "conv_grouped",
        "Conv",
        [rand(1, 6, 8, 8), rand(9, 2, 3, 3), rand(9)],
        {"group": 3, "pads": [1, 1, 1, 1]},
    ),
    Case(
        "conv_depthwise_s2",
        "Conv",
        [rand(2, 8, 9, 9), rand(8, 1, 3, 3), rand(8)],
        {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]},
    ),
    Case(
        "conv_depthwise_multiplier",
        "Conv",
        [rand(1, 4, 7, 7), rand(8, 1, 3, 3)],
        {"group": 4, "pads": [1, 1, 1, 1]},
    ),
    Case("conv_pointwise", "Conv", [rand(2, 16, 5, 6), rand(7, 16, 1, 1)]),
    Case(
        "conv_pointwise_stride2",
        "Conv",
        [rand(1, 8, 7, 7), rand(4, 8, 1, 1), rand(4)],
        {"strides": [2, 2]},
    ),
    Case(
        "conv_same_upper_s2",
        "Conv",
        [rand(1, 3, 7, 8), rand(2, 3, 4, 4)],
        {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    ),
    Case(
        "conv_same_lower", "Conv", [rand(1, 3, 6, 6), rand(2, 3, 4, 4)], {"auto_pad": "SAME_LOWER"}
    ),
    Case("conv_valid", "Conv", [rand(1, 3, 6, 7), rand(2, 3, 3, 2)], {"auto_pad": "VALID"}),
    Case(
        "conv_1d",
        "Conv",
        [rand(2, 3, 20), rand(4, 3, 5), rand(4)],
        {"pads": [2, 1], "strides": [2]},
    ),
    Case(
        "conv_3d", "Conv", [rand(1, 2, 5, 6, 7), rand(3, 2, 3, 3, 3)], {"pads": [1, 0, 1, 1, 0, 1]}
    ),
    # K = 32·81 and 64 outputs per row: the column matrix is built in row blocks.
    Case(
        "conv_9x9_blocked",
        "Conv",
        [rand(1, 32, 72, 64), rand(8, 32, 9, 9), rand(8)],
        {"pads": [4, 4, 4, 4]},
    ),
    Case(
        "maxpool_3x3_s2_ceil",
        "MaxPool",
        [rand(1, 4, 13, 13)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    ),
    Case(
        "maxpool_pads",
        "MaxPool",
        [rand(2, 3, 8, 9)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    ),
    Case(
        "maxpool_dilated",
        "MaxPool",
        [rand(1, 2, 10, 10)],
        {"kernel_shape": [2, 2], "dilations": [2, 2]},
    ),
    Case(
        "maxpool_same_upper",
        "MaxPool",
        [rand(1, 2, 7, 6)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    ),
    Case("maxpool_1d", "MaxPool", [rand(1, 3, 17)], {"kernel_shape": [4], "strides": [3]}),
    Case("maxpool_3d", "MaxPool", [rand(1, 2, 6, 5, 6)], {"kernel_shape": [2, 2, 2]}),
    Case(
        "avgpool_exclude_pad",
        "AveragePool",
        [rand(1, 3, 7, 7)],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    ),
    Case(
        "avgpool_include_pad",
        "AveragePool",
        [rand(1, 3, 7, 7)],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    ),
    Case(
        "avgpool_ceil",
        "AveragePool",
        [rand(1, 2, 8, 8)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    ),
    Case(
        "avgpool_ceil_pads_include",
        "AveragePool",
        [rand(1, 2, 8, 8)],
        {
            "kernel_shape": [3, 3],
            "strides": [2, 2],
            "pads": [1, 1, 1, 1],
            "ceil_mode": 1,
            "count_include_pad": 1,
        },
    ),
    Case("global_avgpool", "GlobalAveragePool", [rand(2, 5, 6, 7)]),
    Case("global_maxpool", "GlobalMaxPool", [rand(2, 5, 3, 4)]),  # onnx.reference breaks on 1-D
    Case("gemm_transB_bias", "Gemm", [rand(3, 5), rand(4, 5), rand(4)], {"transB": 1}),
    Case(
        "gemm_transA_alpha_beta",
        "Gemm",
        [rand(5, 3), rand(5, 4), rand(3, 4)],
        {"transA": 1, "alpha": 0.5, "beta": 2.0},
    ),
    Case("gemm_no_c", "Gemm", [rand(2, 3), rand(3, 6)]),
    Case("gemm_scalar_c", "Gemm", [rand(2, 3), rand(3, 6), rand(1, 1)], {"beta": -1.0}),
    Case("matmul_2d", "MatMul", [rand(7, 9), rand(9, 4)]),
    Case("matmul_broadcast_batch", "MatMul", [rand(2, 1, 3, 4), rand(5, 4, 6)]),
    Case("matmul_1d_left", "MatMul", [rand(4), rand(2, 4, 3)]),
    Case("matmul_1d_right", "MatMul", [rand(2, 3, 4), rand(4)]),
    Case(
        "batchnorm_constant_stats",
        "BatchNormalization",
        [rand(2, 4, 3, 3), rand(4), rand(4), rand(4), RNG.uniform(0.5, 2, 4).astype(np.float32)],
        {"epsilon": 1e-3},
        constant=(1, 2, 3, 4),
    ),
    Case(
        "batchnorm_runtime_stats",
        "BatchNormalization",
        [rand(1, 3, 5), rand(3), rand(3), rand(3), RNG.uniform(0.5, 2, 3).astype(np.float32)],
    ),
    Case("relu", "Relu", [rand(3, 4, 5)]),
    Case("tanh", "Tanh", [rand(10, 3) * 5]),
    Case(
        "sigmoid_extremes",
        "Sigmoid",
        [np.array([-200, -90, -1, 0, 1, 90, 200, np.inf, -np.inf], np.float32)],
    ),
    Case("add_broadcast", "Add", [rand(2, 3, 4), rand(3, 1)]),
    Case("sub_broadcast", "Sub", [rand(4), rand(2, 3, 4)]),
    Case("mul", "Mul", [rand(2, 3), rand(2, 3)]),
    Case("div_scalar", "Div", [rand(2, 3), np.array(0.25, np.float32)]),
    Case(
        "clip_inputs", "Clip", [rand(4, 5), np.array(-0.5, np.float32), np.array(0.5, np.float32)]
    ),
    Case("clip_min_only", "Clip", [rand(4, 5), np.array(0.0, np.float32)], constant=(1,)),
    Case(
        "clip_min_above_max",
        "Clip",
        [rand(3, 3), np.array(1.0, np.float32), np.array(-1.0, np.float32)],
    ),
    Case("clip_nan", "Clip", [f32(np.nan, -2, 2), f32(-1), f32(1)], constant=(1, 2)),
    Case("clip_opset6_attrs", "Clip", [rand(4, 5)], {"min": 0.0, "max": 6.0}, opset=6),
    Case("concat_axis1", "Concat", [rand(1, 2, 3), rand(1, 4, 3), rand(1, 1, 3)], {"axis": 1}),
    Case("concat_neg_axis_empty", "Concat", [rand(2, 0), rand(2, 3)], {"axis": -1}),
    Case(
        "instancenorm",
        "InstanceNormalization",
        [rand(2, 3, 5, 6), rand(3), rand(3)],
        {"epsilon": 1e-3},
    ),
    Case("layernorm_last", "LayerNormalization", [rand(2, 5, 16) * 3 + 1, rand(16), rand(16)]),
    Case(
        "layernorm_axis1_no_bias",
        "LayerNormalization",
        [rand(2, 3, 4), rand(3, 4)],
        {"axis": 1, "epsilon": 1e-3},
    ),
    Case("transpose_perm", "Transpose", [rand(2, 3, 4, 5)], {"perm": [0, 2, 3, 1]}),
    Case("transpose_default", "Transpose", [rand(2, 3, 4)]),
    Case("concat_channels", "Concat", [rand(1, 2, 3, 4), rand(1, 5, 3, 4), rand(1, 1, 3, 4)],
         {"axis": 1}),
    Case("concat_negative_axis", "Concat", [rand(2, 3), rand(2, 0), rand(2, 4)], {"axis": -1}),
    Case("concat_int64", "Concat", [i64(1, 2), i64(3)], {"axis": 0}),
    Case(
        "pad_constant_value",
        "Pad",
        [rand(1, 2, 3, 4), i64(0, 0, 1, 2, 0, 0, 2, 1), np.array(1.5, np.float32)],
        constant=(1,),
    ),
    Case(
        "pad_reflect",
        "Pad",
        [rand(1, 2, 5, 6), i64(0, 0, 2, 3, 0, 0, 1, 4)],
        {"mode": "reflect"},
        constant=(1,),
    ),
    Case("pad_edge_runtime_pads", "Pad", [rand(2, 4, 3), i64(1, 0, 2, 0, 3, 1)], {"mode": "edge"}),
    # onnx.reference 1.23 rejects negative pads (np.pad); onnxruntime crops.
    Case(
        "pad_negative_crop",
        "Pad",
        [rand(1, 2, 6, 6), i64(0, 0, -1, 2, 0, 0, 2, -3)],
        constant=(1,),
        truth="ort",
    ),
    Case(
        "pad_axes_opset18",
        "Pad",
        [rand(2, 3, 4), i64(1, 2), None, i64(-1)],
        {"mode": "reflect"},
        opset=18,
        constant=(1, 3),
    ),
    Case(
        "resize_nearest_scales2",
        "Resize",
        [rand(1, 2, 3, 4), None, f32(1, 1, 2, 2)],
        {"mode": "nearest"},
        constant=(2,),
    ),
    Case(
        "resize_nearest_runtime_scales",
        "Resize",
        [rand(1, 2, 3, 4), None, f32(1, 1, 1.5, 2.5)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
    ),
    Case(
        "resize_nearest_sizes_down",
        "Resize",
        [rand(1, 1, 7, 9), None, None, i64(1, 1, 3, 4)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "align_corners",
            "nearest_mode": "round_prefer_ceil",
        },
        constant=(3,),
    ),
    Case(
        "resize_nearest_tf_half_pixel_opset11",
        "Resize",
        [rand(1, 1, 4, 4), f32(), f32(1, 1, 3, 0.5)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "tf_half_pixel_for_nn",
            "nearest_mode": "ceil",
        },
        opset=11,
        constant=(1, 2),
        truth="ort",
    ),  # not in onnx.reference
    Case(
        "resize_linear_half_pixel_up",
        "Resize",
        [rand(1, 2, 5, 6), None, f32(1, 1, 2, 3)],
        {"mode": "linear"},
        constant=(2,),
    ),
    Case(
        "resize_linear_align_corners_sizes",
        "Resize",
        [rand(1, 2, 5, 6), None, None, i64(1, 2, 9, 4)],
        {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
        constant=(3,),
    ),
    Case(
        "resize_linear_asymmetric_down",
        "Resize",
        [rand(2, 3, 8, 8), None, f32(1, 1, 0.5, 0.75)],
        {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
    ),
    Case(
        "resize_linear_pytorch_half_pixel_1d",
        "Resize",
        [rand(2, 3, 7), None, f32(1, 1, 1.5)],
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
        constant=(2,),
    ),
    Case("erf", "Erf", [np.linspace(-5, 5, 101, dtype=np.float32)]),
    Case("softmax_axis1", "Softmax", [rand(2, 3, 4) * 10], {"axis": 1}),
    Case("softmax_last", "Softmax", [rand(2, 3, 40)]),
    # onnx.reference 1.23 applies opset-13 semantics here; onnxruntime coerces to 2-D.
    Case("softmax_opset11_coerced", "Softmax", [rand(2, 3, 4)], {"axis": 1}, opset=11, truth="ort"),
]


def onnx_expected(case: Case) -> list[np.ndarray]:
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(case.inputs)]
    node = helper.make_node(case.op, names, ["y"], **case.attrs)
    graph = helper.make_graph(
        [node],
        case.name,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, case.inputs)
            if a is not None
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    feeds = {n: a for n, a in zip(names, case.inputs) if a is not None}
    if case.truth == "ort":
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, feeds), node
    with np.errstate(over="ignore", invalid="ignore"):
        return list(ReferenceEvaluator(model).run(None, feeds)), node


def info(array: np.ndarray) -> TensorInfo:
    return TensorInfo(as_dtype(array.dtype), tuple(array.shape))


def run_fast(case: Case, node_proto, out_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Run the registered fast kernel directly on cpu DeviceTensors."""
    cpu = get_backend("cpu")
    node = node_from_proto(node_proto, case.opset)
    kernel = next(k for k in ALL if k.op_type == case.op)()
    ins = [None if a is None else info(a) for a in case.inputs]
    outs = [TensorInfo(as_dtype(np.float32), s) for s in out_shapes]
    assert kernel.supports(node, ins, outs), case.name
    values = [a if i in case.constant else None for i, a in enumerate(case.inputs)]
    run = kernel.prepare(cpu, node, ins, outs, values)
    tensors = [None if a is None else DeviceTensor.from_numpy(cpu, a) for a in case.inputs]
    results = [DeviceTensor.empty(cpu, s, "float32") for s in out_shapes]
    run(tensors, results)
    return [r.numpy() for r in results]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fast_kernel_matches_onnx_reference(case):
    expected, node = onnx_expected(case)
    got = run_fast(case, node, [e.shape for e in expected])
    for g, e in zip(got, expected):  # float32 sums: the error scales with the output's size
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_portable_lowering_agrees(case, monkeypatch):
    """With fast kernels off, the portable kernel runs the same case to the same answer."""
    monkeypatch.setenv(fast_kernels.ENV, "0")
    expected, node_proto = onnx_expected(case)
    node = node_from_proto(node_proto, case.opset)
    kernel = next(k for k in ALL if k.op_type == case.op)()
    outs = [TensorInfo(as_dtype(np.float32), e.shape) for e in expected]
    assert not kernel.supports(node, [info(a) for a in case.inputs if a is not None], outs)
    try:
        op = find_op("", case.op, case.opset)
        got = run_node(get_backend("cpu"), op, node, case.inputs)
    except (SpawnMLError, NotImplementedError) as exc:
        pytest.skip(f"portable {case.op} not available: {type(exc).__name__}: {exc}")
    for g, e in zip(got, expected):  # float32 sums in another order: scaled as above
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5 * scale)


def test_fused_activation_applied():
    case = Case("conv_relu", "Conv", [rand(1, 3, 6, 6), rand(4, 3, 3, 3)], {"pads": [1, 1, 1, 1]})
    expected, node_proto = onnx_expected(case)
    node = node_from_proto(node_proto, 17)
    node.attrs[FUSED_ATTR] = FusedActivation("Relu", {}, 17)
    cpu = get_backend("cpu")
    kernel = fast_kernels.Conv()
    ins = [info(a) for a in case.inputs]
    outs = [TensorInfo(as_dtype(np.float32), expected[0].shape)]
    run = kernel.prepare(cpu, node, ins, outs, [None, None])
    tensors = [DeviceTensor.from_numpy(cpu, a) for a in case.inputs]
    result = DeviceTensor.empty(cpu, expected[0].shape, "float32")
    run(tensors, [result])
    np.testing.assert_allclose(result.numpy(), np.maximum(expected[0], 0), rtol=1e-5, atol=1e-5)


def test_declines_what_it_does_not_handle():
    f32, f64 = as_dtype("float32"), as_dtype("float64")
    node = node_from_proto(helper.make_node("Relu", ["x"], ["y"]), 17)
    assert not fast_kernels.Relu().supports(node, [TensorInfo(f64, (2,))], [TensorInfo(f64, (2,))])
    assert not fast_kernels.Relu().supports(
        node, [TensorInfo(f32, ("n",))], [TensorInfo(f32, ("n",))]
    )
    pool = node_from_proto(helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2]), 17)
    x, y = TensorInfo(f32, (1, 1, 4)), TensorInfo(f32, (1, 1, 3))
    assert not fast_kernels.MaxPool().supports(
        pool, [x], [y, TensorInfo(as_dtype("int64"), (1, 1, 3))]
    )


def test_host_view_is_zero_copy():
    cpu = get_backend("cpu")
    t = DeviceTensor.from_numpy(cpu, np.arange(6, dtype=np.float32).reshape(2, 3))
    view = fast_kernels.host_view(t)
    view[1, 2] = 42
    assert t.numpy()[1, 2] == 42 and view.shape == (2, 3)
