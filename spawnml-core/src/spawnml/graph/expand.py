"""Inlining of graphs into an enclosing graph, and the pass that replaces nodes by the
function bodies their OpDefs give (``OpDef.function_body``).

A body is inlined like an ONNX function call: its inputs take the caller's values, its
outputs are written under the caller's output names, every other name it defines gets a
prefix unique in the enclosing graph, and the names it reads from outer scopes are kept.
The inlined nodes then plan, fold, fuse and run like any others, on every backend, with no
host round trip (FlexAttention's score_mod / prob_mod graphs run this way).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidModelError, UnsupportedOpError
from ..op import Node, TensorInfo
from ..registry import find_op
from .ir import Graph, Value

EXPANSION_OPSET = 21
"""The ai.onnx opset of nodes that expansions make themselves (a body's own nodes keep theirs)."""


@dataclass
class Inlined:
    """A body's nodes, initializers and value types, renamed into the enclosing scope."""

    nodes: list[Node] = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    value_info: dict[str, TensorInfo] = field(default_factory=dict)

    def absorb_into(self, graph: Graph) -> list[Node]:
        """Add the initializers and value types to ``graph``; returns the nodes, for the
        caller to put where the call was."""
        graph.initializers.update(self.initializers)
        for name, info in self.value_info.items():
            graph.value_info.setdefault(name, info)
        return self.nodes


def scope_names(graph: Graph) -> set[str]:
    """Every name a graph defines (inputs, initializers, node outputs; nested graphs
    included) or reads from enclosing scopes: what an inlined body must not redefine."""
    names = {v.name for v in graph.inputs} | set(graph.initializers) | graph.outer_names()
    for node in graph.walk():
        names.update(o for o in node.outputs if o)
        for sub in node.subgraphs.values():
            names.update(v.name for v in sub.inputs)
            names.update(sub.initializers)
    return names


def fresh_prefix(base: str, taken: Iterable[str]) -> str:
    """``base + "/"``, or ``base + "#k/"``, such that no name in ``taken`` starts with it."""
    taken = list(taken)
    prefix, k = f"{base}/", 1
    while any(name.startswith(prefix) for name in taken):
        prefix, k = f"{base}#{k}/", k + 1
    return prefix


def _rename_graph(graph: Graph, names: dict[str, str]) -> None:
    """Rename, in place, every reference to ``names`` in a nested graph (its own definitions
    never collide: ONNX names are unique across nested scopes)."""
    for node in graph.nodes:
        _rename_node(node, names)
    graph.outputs = [Value(names.get(v.name, v.name), v.info) for v in graph.outputs]


def _rename_node(node: Node, names: dict[str, str]) -> None:
    node.inputs = [names.get(x, x) for x in node.inputs]
    node.outputs = [names.get(x, x) for x in node.outputs]
    for sub in node.subgraphs.values():
        _rename_graph(sub, names)


def _local_names(body: Graph, inputs: Sequence[str], prefix: str) -> dict[str, str]:
    """The new name of every value the body defines at its top level."""
    names = {v.name: outer for v, outer in zip(body.inputs, inputs)}
    for name in body.initializers:
        names[name] = prefix + name
    for node in body.nodes:
        names.update((o, prefix + o) for o in node.outputs if o)
    return names


def _bind_outputs(body: Graph, names: dict[str, str], outputs: Sequence[str],
                  prefix: str) -> list[Node]:
    """Make each body output be written under the caller's name: its producer is renamed,
    or an Identity copies it (a body passing an input, an initializer or an outer value
    straight through, or returning one value twice)."""
    producers = {o for n in body.nodes for o in n.outputs if o}
    copies: list[Node] = []
    bound: set[str] = set()
    for i, (v, target) in enumerate(zip(body.outputs, outputs)):
        if not target:
            continue
        if v.name in producers and v.name not in bound:
            names[v.name] = target
            bound.add(v.name)
            continue
        source = names.get(v.name, v.name)
        copies.append(Node("Identity", [source], [target], name=f"{prefix}output{i}",
                           opset=EXPANSION_OPSET))
    return copies


def inline_graph(body: Graph, inputs: Sequence[str], outputs: Sequence[str],
                 prefix: str) -> Inlined:
    """``body``'s nodes renamed into the caller's scope: body input i reads ``inputs[i]``,
    body output j is written as ``outputs[j]`` ("" keeps a prefixed name), every other name
    the body defines gets ``prefix``. The body itself is left unchanged."""
    if len(inputs) != len(body.inputs) or len(outputs) != len(body.outputs):
        raise InvalidModelError(
            f"graph {body.name!r} takes {len(body.inputs)} input(s) and gives "
            f"{len(body.outputs)} output(s), but is called with {len(inputs)} and {len(outputs)}"
        )
    body = body.copy()
    names = _local_names(body, inputs, prefix)
    copies = _bind_outputs(body, names, outputs, prefix)
    for node in body.nodes:
        _rename_node(node, names)
        node.name = prefix + (node.name or node.op_type)
    out = Inlined(body.nodes + copies)
    out.initializers = {names[k]: a for k, a in body.initializers.items()}
    out.value_info = {names[k]: info for k, info in body.value_info.items() if names.get(k)}
    return out


def _expansion(node: Node, graph: Graph) -> Graph | None:
    """The function body the node's OpDef gives for it, or None."""
    try:
        op = find_op(node.domain, node.op_type, node.opset)
    except UnsupportedOpError:  # reported by the session's op check
        return None
    return op.function_body(node, [graph.info(x) if x else None for x in node.inputs])


def expand_nodes(graph: Graph) -> int:
    """Replace, in place and in every nested graph, each node whose OpDef gives a function
    body by that body inlined; returns how many nodes were expanded."""
    count = 0
    nodes: list[Node] = []
    for node in graph.nodes:
        for sub in node.subgraphs.values():
            count += expand_nodes(sub)
        body = _expansion(node, graph)
        if body is None:
            nodes.append(node)
            continue
        prefix = fresh_prefix(node.name or node.op_type, scope_names(graph))
        nodes.extend(inline_graph(body, node.inputs, node.outputs, prefix).absorb_into(graph))
        count += 1
    graph.nodes = nodes
    return count
