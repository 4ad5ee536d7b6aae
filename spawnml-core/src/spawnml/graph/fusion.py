"""Activation fusion: fold an activation node into the preceding Conv/Gemm/MatMul node.

An OpDef opts in by listing the activations its kernel can apply to its result in the class
attribute ``fusable_activations`` (e.g. ``frozenset({"Relu", "LeakyRelu", "Clip"})``). The
fused node carries ``node.attrs[FUSED_ATTR] = (op_type, attrs, opset)`` of the activation;
its ``lower`` applies it in the same kernel (see :func:`fused_activation`), and host runs
apply the activation's numpy reference after the op's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..op import Node, OpDef
from ..registry import find_op

FUSED_ATTR = "_fused_activation"
ACTIVATIONS = {
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "Elu", "Selu", "Softplus",
    "HardSwish", "Gelu",
}  # fmt: skip


def fused_activation(node: Node) -> tuple[OpDef, Node] | None:
    """The activation fused into ``node``: its OpDef and a node holding its attributes."""
    found = node.attrs.get(FUSED_ATTR)
    if found is None:
        return None
    op_type, attrs, opset = found
    act = Node(op_type, [node.outputs[0]], [node.outputs[0]], dict(attrs), node.name, "", opset)
    return find_op("", op_type, opset), act


def apply_fused_activation(node: Node, array: np.ndarray) -> np.ndarray:
    """Apply the fused activation's numpy reference to a host result."""
    found = fused_activation(node)
    if found is None:
        return array
    op, act = found
    with np.errstate(all="ignore"):
        return np.asarray(op.reference(act, [array])[0])


def can_fuse(op: OpDef, activation: str) -> bool:
    return activation in getattr(op, "fusable_activations", ())


def fuse_activations(graph: Any, outputs: set[str]) -> int:
    """Fuse each single-input activation into its producer when the producer's OpDef opts in
    and the producer's output feeds only the activation. Returns the number fused."""
    from .plan import lookup_op

    consumers = graph.consumers()
    producers = graph.producers()
    removed: set[int] = set()
    count = 0
    for act in graph.nodes:
        if act.op_type not in ACTIVATIONS or act.domain or act.subgraphs:
            continue
        if len([i for i in act.inputs if i]) != 1 or act.inputs[0] in outputs:
            continue
        src = producers.get(act.inputs[0])
        if (
            src is None
            or id(src) in removed
            or FUSED_ATTR in src.attrs
            or src.outputs[0] != act.inputs[0]
        ):
            continue
        if len(consumers.get(act.inputs[0], [])) != 1:
            continue
        try:
            if not can_fuse(lookup_op(src), act.op_type):
                continue
            lookup_op(act)
        except Exception:  # noqa: BLE001 - unknown ops are reported by the session later
            continue
        src.attrs[FUSED_ATTR] = (act.op_type, dict(act.attrs), act.opset)
        src.outputs[0] = act.outputs[0]
        removed.add(id(act))
        count += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    return count
