"""Activation fusion: fold an activation node into the preceding Conv/Gemm/MatMul node.

An OpDef opts in by listing the activations its kernel can apply to its result in the class
attribute ``fusable_activations`` (e.g. ``frozenset({"Relu", "LeakyRelu", "Clip"})``). The
fused node carries ``node.attrs[FUSED_ATTR]``, a :class:`FusedActivation`; its ``lower``
applies it in the same kernel (see :func:`fused_activation`), and host runs apply the
activation's numpy reference after the op's own.

An activation's inputs after the first (Clip's ``min``/``max``) must be graph constants: their
values travel with the fused node, so the kernel can bake them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..op import Node, OpDef
from ..registry import find_op

FUSED_ATTR = "_fused_activation"
ACTIVATIONS = {
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "Elu", "Selu", "Softplus",
    "HardSwish", "Gelu",
}  # fmt: skip


@dataclass(frozen=True)
class FusedActivation:
    """An activation folded into its producer: its type, attributes, opset and constant
    extra inputs as ``(name, value)`` pairs (``("", None)`` for an omitted optional input)."""

    op_type: str
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 1
    constants: tuple[tuple[str, np.ndarray | None], ...] = ()

    def node(self, value: str, name: str = "") -> Node:
        """The activation as a node reading ``value`` (and its constants by name)."""
        inputs = [value, *(n for n, _ in self.constants)]
        return Node(self.op_type, inputs, [value], dict(self.attrs), name, "", self.opset)

    def arrays(self) -> list[np.ndarray | None]:
        """The constant extra inputs, in input order."""
        return [v for _, v in self.constants]


def fused_activation(node: Node) -> tuple[OpDef, Node, list[np.ndarray | None]] | None:
    """The activation fused into ``node``: its OpDef, a node holding its attributes, and the
    values of its constant extra inputs."""
    found: FusedActivation | None = node.attrs.get(FUSED_ATTR)
    if found is None:
        return None
    op = find_op("", found.op_type, found.opset)
    return op, found.node(node.outputs[0], node.name), found.arrays()


def apply_fused_activation(node: Node, array: np.ndarray) -> np.ndarray:
    """Apply the fused activation's numpy reference to a host result."""
    found = fused_activation(node)
    if found is None:
        return array
    op, act, constants = found
    with np.errstate(all="ignore"):
        return np.asarray(op.reference(act, [array, *constants])[0])


def can_fuse(op: OpDef, activation: str) -> bool:
    return activation in getattr(op, "fusable_activations", ())


def _constants(graph: Any, act: Node, outputs: set[str]) -> tuple | None:
    """The activation's extra inputs as (name, value) pairs, or None if one is not constant."""
    found = []
    for name in act.inputs[1:]:
        if not name:
            found.append(("", None))
        elif name in graph.initializers and name not in outputs:
            found.append((name, graph.initializers[name]))
        else:
            return None
    return tuple(found)


def fuse_activations(graph: Any, outputs: set[str]) -> int:
    """Fuse each activation into its producer when the producer's OpDef opts in, the
    producer's output feeds only the activation and the activation's other inputs are
    constants. Returns the number fused."""
    from .plan import lookup_op

    consumers = graph.consumers()
    producers = graph.producers()
    graph_inputs = {v.name for v in graph.inputs}
    removed: set[int] = set()
    count = 0
    for act in graph.nodes:
        if act.op_type not in ACTIVATIONS or act.domain or act.subgraphs:
            continue
        if not act.inputs or not act.inputs[0] or act.inputs[0] in outputs:
            continue
        constants = _constants(graph, act, outputs | graph_inputs)
        src = producers.get(act.inputs[0])
        if (
            constants is None
            or src is None
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
        src.attrs[FUSED_ATTR] = FusedActivation(act.op_type, dict(act.attrs), act.opset, constants)
        src.outputs[0] = act.outputs[0]
        removed.add(id(act))
        count += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    return count
