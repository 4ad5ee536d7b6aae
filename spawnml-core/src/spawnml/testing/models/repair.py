"""Deterministic, documented rewrites of fetched models (never changes what they compute
beyond the stated precision): topological node order and float16 → float32 widening."""

from __future__ import annotations

from collections import deque

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def toposort(model: onnx.ModelProto) -> onnx.ModelProto:
    """Reorder the main graph's nodes so each comes after the producers of its inputs
    (the ONNX spec requires it; some converted models break the rule)."""
    graph = model.graph
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    producers: dict[str, int] = {o: i for i, n in enumerate(graph.node) for o in n.output}
    waiting = [0] * len(graph.node)
    consumers: dict[int, list[int]] = {}
    for i, node in enumerate(graph.node):
        deps = {producers[x] for x in node.input if x not in available and x in producers}
        waiting[i] = len(deps)
        for d in deps:
            consumers.setdefault(d, []).append(i)
    ready = deque(i for i, w in enumerate(waiting) if w == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for c in consumers.get(i, []):
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) != len(graph.node):
        raise ValueError(f"graph {graph.name!r} has a cycle or reads undefined values")
    nodes = [graph.node[i] for i in order]
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _widen(tensor: TensorProto) -> TensorProto:
    if tensor.data_type != TensorProto.FLOAT16:
        return tensor
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float32), tensor.name)


def float16_to_float32(model: onnx.ModelProto) -> onnx.ModelProto:
    """Widen every float16 weight, constant, cast target and declared type to float32.

    float16 → float32 is exact, so the result is the same network computed in float32."""
    graph = model.graph
    widened = [_widen(t) for t in graph.initializer]
    del graph.initializer[:]
    graph.initializer.extend(widened)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                attr.t.CopyFrom(_widen(attr.t))
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT16:
                attr.i = TensorProto.FLOAT
            elif attr.type == onnx.AttributeProto.GRAPH:
                raise ValueError(f"{node.name}: subgraphs are not widened")
    for info in [*graph.input, *graph.output, *graph.value_info]:
        tensor_type = info.type.tensor_type
        if tensor_type.elem_type == TensorProto.FLOAT16:
            tensor_type.elem_type = TensorProto.FLOAT
    return model
