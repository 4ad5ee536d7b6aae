"""The graph IR: nodes, values and initializers of one ONNX graph (or If/Loop body).

A :class:`Graph` keeps its nodes in topological order. Nodes are :class:`spawnml.op.Node`;
subgraphs (If branches, Loop bodies) are nested :class:`Graph` objects in ``node.subgraphs``.
Names a subgraph reads without defining them come from the enclosing scopes
(``Graph.outer_names``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import dtype as as_dtype
from ..errors import InvalidModelError
from ..op import Node, TensorInfo


@dataclass
class Value:
    """A named graph input or output with its declared type."""

    name: str
    info: TensorInfo | None


@dataclass
class Graph:
    """One graph: inputs, outputs, initializers (host arrays) and nodes in topological order."""

    nodes: list[Node]
    inputs: list[Value]
    outputs: list[Value]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    value_info: dict[str, TensorInfo] = field(default_factory=dict)
    opsets: dict[str, int] = field(default_factory=dict)
    name: str = ""

    # -- structure -----------------------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        """Value name -> the node producing it."""
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        """Value name -> nodes reading it (including reads from inside their subgraphs)."""
        found: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in node_reads(n):
                found.setdefault(name, []).append(n)
        return found

    def info(self, name: str) -> TensorInfo | None:
        """The declared or inferred type of a value, if known."""
        if name in self.initializers:
            a = self.initializers[name]
            return TensorInfo(as_dtype(a.dtype), tuple(a.shape))
        for v in self.inputs:
            if v.name == name:
                return v.info
        return self.value_info.get(name)

    def outer_names(self) -> set[str]:
        """Names read by this graph's nodes (or nested subgraphs) that it does not define."""
        defined = {v.name for v in self.inputs} | set(self.initializers)
        free: set[str] = set()
        for n in self.nodes:
            free |= {x for x in node_reads(n) if x and x not in defined}
            defined |= {o for o in n.outputs if o}
        free |= {v.name for v in self.outputs if v.name not in defined}
        return free

    def walk(self) -> Iterator[Node]:
        """Every node, including those inside subgraphs."""
        for n in self.nodes:
            yield n
            for sub in n.subgraphs.values():
                yield from sub.walk()

    def copy(self) -> Graph:
        """A shallow structural copy (new node list, same arrays) for passes to rewrite."""
        return Graph(
            nodes=[_copy_node(n) for n in self.nodes],
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            initializers=dict(self.initializers),
            value_info=dict(self.value_info),
            opsets=dict(self.opsets),
            name=self.name,
        )


def _copy_node(n: Node) -> Node:
    return Node(
        op_type=n.op_type, inputs=list(n.inputs), outputs=list(n.outputs), attrs=dict(n.attrs),
        name=n.name, domain=n.domain, opset=n.opset,
        subgraphs={k: g.copy() for k, g in n.subgraphs.items()},
    )  # fmt: skip


def node_reads(node: Node) -> list[str]:
    """The value names a node reads: its inputs plus outer names of its subgraphs."""
    names = [i for i in node.inputs if i]
    for sub in node.subgraphs.values():
        names.extend(sorted(sub.outer_names()))
    return names


def topological_order(
    nodes: Iterable[Node], available: set[str], where: str = "graph"
) -> list[Node]:
    """Nodes sorted so each runs after its inputs' producers; InvalidModelError on cycles or
    on inputs that nothing defines (``available`` holds graph inputs, initializers and
    outer-scope names)."""
    nodes = list(nodes)
    produced = {o: i for i, n in enumerate(nodes) for o in n.outputs if o}
    for n in nodes:
        for name in node_reads(n):
            if name not in produced and name not in available:
                raise InvalidModelError(
                    f"{where}: {n.describe()} reads {name!r}, which is neither a graph input, "
                    "an initializer nor the output of any node"
                )
    # Kahn's algorithm, stable in the model's order.
    deps = [
        {produced[x] for x in node_reads(n) if x in produced and x not in available} for n in nodes
    ]
    users: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        for j in d:
            users.setdefault(j, []).append(i)
    remaining = [len(d) for d in deps]
    ready = [i for i, r in enumerate(remaining) if r == 0]
    order: list[int] = []
    while ready:
        ready.sort(reverse=True)
        i = ready.pop()
        order.append(i)
        for u in users.get(i, ()):
            remaining[u] -= 1
            if remaining[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        stuck = [nodes[i].describe() for i, r in enumerate(remaining) if r > 0][:5]
        raise InvalidModelError(f"{where}: the nodes form a cycle (involving {', '.join(stuck)})")
    return [nodes[i] for i in order]
