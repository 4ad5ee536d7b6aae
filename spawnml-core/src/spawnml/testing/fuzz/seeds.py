"""Small valid seed models for the mutator: single-node and short multi-node graphs.

Each seed is built in code with ``onnx.helper`` (no external data) and passes
``onnx.checker.check_model(full_check=True)``; together they cover Conv, MatMul, Gemm, Slice,
Reshape, Resize, Gather, Softmax, Reduce*, Concat, Pad, Expand, TopK, ArgMax, CumSum and
LayerNormalization, with initializers of float32 and int64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64

Spec = tuple[str, int, Sequence[int | str] | None]


def _const(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    return rng.standard_normal(tuple(shape)).astype(np.float32)


def _i64(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def build(
    name: str,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[Spec],
    outputs: Sequence[Spec],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """A model from nodes, ``(name, elem_type, shape)`` inputs/outputs and initializers."""
    graph = helper.make_graph(
        list(nodes),
        name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(a, k) for k, a in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _conv(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1],
                         kernel_shape=[3, 3], name="conv"),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    inits = {"w": _const(rng, (3, 2, 3, 3)), "b": _const(rng, (3,))}
    return build("conv", nodes, [("x", F32, [1, 2, 6, 6])], [("y", F32, [1, 3, 6, 6])], inits)


def _matmul_softmax(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Softmax", ["a"], ["y"], axis=-1, name="softmax"),
    ]
    inits = {"w": _const(rng, (4, 5)), "b": _const(rng, (5,))}
    return build("matmul_softmax", nodes, [("x", F32, ["N", 4])], [("y", F32, ["N", 5])], inits)


def _gemm(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0,
                            name="gemm")
    inits = {"b": _const(rng, (5, 4)), "c": _const(rng, (5,))}
    return build("gemm", [node], [("a", F32, [3, 4])], [("y", F32, [3, 5])], inits)


def _slice(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"],
                            name="slice")
    inits = {"starts": _i64([1, -1]), "ends": _i64([4, -7]), "axes": _i64([0, 1]),
             "steps": _i64([2, -2])}
    return build("slice", [node], [("x", F32, [4, 6])], [("y", F32, [2, 3])], inits)


def _reshape(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0], name="transpose"),
    ]
    inits = {"shape": _i64([6, -1])}
    return build("reshape", nodes, [("x", F32, [2, 3, 4])], [("y", F32, [4, 6])], inits)


def _resize(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel", name="resize")
    inits = {"scales": np.asarray([1, 1, 2, 1.5], np.float32)}
    return build("resize", [node], [("x", F32, [1, 1, 4, 4])], [("y", F32, [1, 1, 8, 6])],
                 inits)


def _resize_sizes(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                            nearest_mode="floor", name="resize")
    inits = {"sizes": _i64([1, 2, 3, 5])}
    return build("resize_sizes", [node], [("x", F32, [1, 2, 4, 4])], [("y", F32, [1, 2, 3, 5])],
                 inits)


def _gather_concat(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gather", ["data", "idx"], ["g"], axis=0, name="gather"),
        helper.make_node("Concat", ["g", "x"], ["y"], axis=0, name="concat"),
    ]
    inits = {"data": _const(rng, (5, 3)), "idx": _i64([0, -1, 2])}
    return build("gather_concat", nodes, [("x", F32, [2, 3])], [("y", F32, [5, 3])], inits)


def _reduce(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1, name="mean"),
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1, name="sum"),
        helper.make_node("Add", ["m", "s"], ["a"], name="add"),
        helper.make_node("ReduceMax", ["a"], ["y"], axes=[-1], keepdims=0, name="max"),
    ]
    inits = {"axes": _i64([1])}
    return build("reduce", nodes, [("x", F32, [2, 3, 4])], [("y", F32, [2, 1])], inits)


def _concat_pad(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Concat", ["x", "w"], ["c"], axis=1, name="concat"),
        helper.make_node("Pad", ["c", "pads", "value"], ["y"], mode="constant", name="pad"),
    ]
    inits = {"w": _const(rng, (2, 2)), "pads": _i64([1, 0, 0, 2]),
             "value": np.asarray(0.5, np.float32)}
    return build("concat_pad", nodes, [("x", F32, [2, 3])], [("y", F32, [3, 7])], inits)


def _pad_reflect(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect", name="pad")
    inits = {"pads": _i64([0, 0, 1, 2, 0, 0, 2, 1])}
    return build("pad_reflect", [node], [("x", F32, [1, 2, 4, 4])], [("y", F32, [1, 2, 7, 7])],
                 inits)


def _expand(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["e"], name="expand"),
        helper.make_node("Mul", ["e", "k"], ["y"], name="mul"),
    ]
    inits = {"shape": _i64([2, 3, 4]), "k": _const(rng, (4,))}
    return build("expand", nodes, [("x", F32, [3, 1])], [("y", F32, [2, 3, 4])], inits)


def _topk(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=1, sorted=1,
                            name="topk")
    return build("topk", [node], [("x", F32, [3, 5])], [("v", F32, [3, 2]), ("i", I64, [3, 2])],
                 {"k": _i64([2])})


def _argmax_cumsum(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("CumSum", ["x", "axis"], ["c"], exclusive=1, reverse=0, name="cumsum"),
        helper.make_node("ArgMax", ["c"], ["y"], axis=1, keepdims=0, name="argmax"),
    ]
    return build("argmax_cumsum", nodes, [("x", F32, [3, 4])], [("y", I64, [3])],
                 {"axis": np.asarray(1, np.int64)})


def _layernorm(rng: np.random.Generator) -> onnx.ModelProto:
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1,
                            epsilon=1e-5, name="ln")
    inits = {"scale": _const(rng, (4,)), "bias": _const(rng, (4,))}
    return build("layernorm", [node], [("x", F32, [2, 3, 4])], [("y", F32, [2, 3, 4])], inits)


def _small_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], name="conv"),
        helper.make_node("ReduceMean", ["c"], ["p"], axes=[2, 3], keepdims=0, name="pool"),
        helper.make_node("Reshape", ["p", "shape"], ["r"], name="reshape"),
        helper.make_node("Gemm", ["r", "fc", "fb"], ["g"], transB=1, name="fc"),
        helper.make_node("Softmax", ["g"], ["y"], axis=1, name="softmax"),
    ]
    inits = {"w": _const(rng, (4, 3, 3, 3)), "shape": _i64([0, -1]),
             "fc": _const(rng, (5, 4)), "fb": _const(rng, (5,))}
    return build("small_cnn", nodes, [("x", F32, [1, 3, 7, 7])], [("y", F32, [1, 5])], inits)


def _int64_indexing(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1, name="gather"),
        helper.make_node("Reshape", ["g", "shape"], ["r"], name="reshape"),
        helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=0, name="sum"),
    ]
    inits = {"idx": _i64([[2, 0], [1, 1]]), "shape": _i64([-1, 4]), "axes": _i64([0])}
    return build("int64_indexing", nodes, [("x", I64, [3, 4])], [("y", I64, [4])], inits,
                 opset=13)


SEEDS: dict[str, Callable[[np.random.Generator], onnx.ModelProto]] = {
    "conv": _conv,
    "matmul_softmax": _matmul_softmax,
    "gemm": _gemm,
    "slice": _slice,
    "reshape": _reshape,
    "resize": _resize,
    "resize_sizes": _resize_sizes,
    "gather_concat": _gather_concat,
    "reduce": _reduce,
    "concat_pad": _concat_pad,
    "pad_reflect": _pad_reflect,
    "expand": _expand,
    "topk": _topk,
    "argmax_cumsum": _argmax_cumsum,
    "layernorm": _layernorm,
    "small_cnn": _small_cnn,
    "int64_indexing": _int64_indexing,
}


@cache
def _seed_bytes(name: str) -> bytes:
    return SEEDS[name](np.random.default_rng(len(name))).SerializeToString()


def seed_model(name: str) -> onnx.ModelProto:
    """A fresh copy of seed ``name`` (its weights are fixed: the same bytes every call)."""
    return onnx.ModelProto.FromString(_seed_bytes(name))
