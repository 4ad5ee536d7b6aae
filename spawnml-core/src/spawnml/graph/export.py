"""Graph -> ONNX ModelProto (to check passes against onnx.reference and to save rewrites)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..op import TensorInfo
from .fusion import FUSED_ATTR
from .ir import Graph


def _value_info(name: str, info: TensorInfo | None) -> Any:
    from onnx import helper

    if info is None:
        return helper.make_empty_tensor_value_info(name)
    shape = None if info.shape is None else list(info.shape)
    return helper.make_tensor_value_info(name, info.dtype.onnx, shape)


def graph_proto(graph: Graph) -> Any:
    """A GraphProto of ``graph`` (fused activations are expanded back into nodes)."""
    from onnx import helper, numpy_helper

    nodes = []
    inits = dict(graph.initializers)
    for n in graph.nodes:
        attrs: dict[str, Any] = {}
        for k, v in n.attrs.items():
            if k == FUSED_ATTR:
                continue
            attrs[k] = numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
        for k, g in n.subgraphs.items():
            attrs[k] = graph_proto(g)
        outputs = list(n.outputs)
        fused = n.attrs.get(FUSED_ATTR)
        if fused is not None:
            outputs[0] = f"{n.outputs[0]}__prefused"
        nodes.append(
            helper.make_node(n.op_type, n.inputs, outputs, n.name, domain=n.domain, **attrs)
        )
        if fused is not None:
            act = fused.node(outputs[0])
            nodes.append(helper.make_node(act.op_type, act.inputs, [n.outputs[0]], **act.attrs))
            inits.update((name, v) for name, v in fused.constants if name)
    return helper.make_graph(
        nodes, graph.name or "graph",
        [_value_info(v.name, v.info) for v in graph.inputs],
        [_value_info(v.name, v.info) for v in graph.outputs],
        [numpy_helper.from_array(a, name) for name, a in inits.items()],
    )  # fmt: skip


def to_model(graph: Graph) -> Any:
    """A ModelProto of ``graph`` with its opset imports."""
    from onnx import helper

    opsets = [helper.make_opsetid(d, v) for d, v in graph.opsets.items()]
    model = helper.make_model(graph_proto(graph), opset_imports=opsets)
    model.ir_version = 8
    return model
