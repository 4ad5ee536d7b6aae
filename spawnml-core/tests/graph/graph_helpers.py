"""Tiny ONNX models built in memory for the graph-runtime tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def make_model(
    nodes: Sequence[Any],
    inputs: Sequence[tuple[str, int, Any]],
    outputs: Sequence[tuple[str, int, Any]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> Any:
    """A ModelProto from nodes, (name, elem_type, shape) inputs/outputs and initializers."""
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def chain_model(n_relu: int = 3, shape: Any = ("N", 4)) -> Any:
    """x -> Sub(-bias) -> Relu ... -> Add(x) -> y (Sub: no activation fuses into it)."""
    nodes = [helper.make_node("Sub", ["x", "b"], ["t0"])]
    for i in range(n_relu):
        nodes.append(helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]))
    nodes.append(helper.make_node("Add", [f"t{n_relu}", "x"], ["y"]))
    b = -np.linspace(-1, 1, 4).astype(np.float32)
    return make_model(nodes, [("x", F, list(shape))], [("y", F, list(shape))], {"b": b})


def chain_reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x + np.linspace(-1, 1, 4).astype(np.float32), 0) + x
