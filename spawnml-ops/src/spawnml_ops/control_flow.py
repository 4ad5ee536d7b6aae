"""Control flow (If, Loop, Scan, SequenceMap): host-orchestrated. The session reads the
condition / trip count on the host and runs each body as a graph of its own on the session's
backends (see ``spawnml.graph.control``). Output types come from specialising the bodies with the
enclosing scope's types (``spawnml.graph.subgraph_types``), which the session does when it
plans; without a scope, as here, the values a body reads from outside are unknown."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.errors import UnsupportedOpError
from spawnml.graph.subgraph_types import control_outputs
from spawnml.op import Node, OpDef, TensorInfo


class _HostOrchestrated(OpDef):
    host_only = True

    def reference(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        raise UnsupportedOpError(
            f"{node.describe()}: {self.op_type} runs its subgraphs through an InferenceSession"
        )

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        return control_outputs(node, inputs, values, {}, {})  # type: ignore[return-value]


class If(_HostOrchestrated):
    op_type = "If"
    since_version = 1


class Loop(_HostOrchestrated):
    op_type = "Loop"
    since_version = 1


class Scan(_HostOrchestrated):
    op_type = "Scan"
    since_version = 8


class SequenceMap(_HostOrchestrated):
    op_type = "SequenceMap"
    since_version = 17


OPS: list[type[OpDef]] = [If, Loop, Scan, SequenceMap]
