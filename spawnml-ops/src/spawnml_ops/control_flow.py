"""Control flow (If, Loop): host-orchestrated. The session reads the condition / trip count
on the host and runs each body as a graph of its own on the session's backends (see
``spawnml.graph.control``); these OpDefs give the shape and dtype rules."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.errors import UnsupportedOpError
from spawnml.op import Node, OpDef, TensorInfo


def _merge(a: TensorInfo | None, b: TensorInfo | None) -> TensorInfo | None:
    """The common description of two branch outputs (differing dims become unknown)."""
    if a is None or b is None or a.dtype != b.dtype:
        return a or b
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorInfo(a.dtype, None)
    return TensorInfo(a.dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))


class _HostOrchestrated(OpDef):
    host_only = True

    def reference(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        raise UnsupportedOpError(
            f"{node.describe()}: {self.op_type} runs its subgraphs through an InferenceSession"
        )

    def _body(self, node: Node, name: str):
        graph = node.subgraphs.get(name)
        if graph is None:
            raise self.fail(node, f"missing required graph attribute {name!r}")
        return graph


class If(_HostOrchestrated):
    op_type = "If"
    since_version = 1

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        then_g, else_g = self._body(node, "then_branch"), self._body(node, "else_branch")
        if len(then_g.outputs) != len(else_g.outputs):
            raise self.fail(
                node,
                f"then_branch has {len(then_g.outputs)} outputs, else_branch {len(else_g.outputs)}",
            )
        if not inputs or inputs[0] is None:
            raise self.fail(node, "the condition input is required")
        cond = values[0] if values else None
        if cond is not None and np.asarray(cond).size == 1:  # a known branch: its exact types
            chosen = then_g if bool(np.asarray(cond).reshape(-1)[0]) else else_g
            return [_typed(chosen, v.name, v.info, node) for v in chosen.outputs]
        return [
            _merge(_typed(then_g, a.name, a.info, node), _typed(else_g, b.name, b.info, node))
            for a, b in zip(then_g.outputs, else_g.outputs)
        ]  # type: ignore[misc]


def _typed(graph, name: str, info: TensorInfo | None, node: Node) -> TensorInfo:
    found = info or graph.value_info.get(name)
    if found is None:
        raise UnsupportedOpError(
            f"{node.describe()}: the type of subgraph output {name!r} is unknown"
        )
    return found


class Loop(_HostOrchestrated):
    op_type = "Loop"
    since_version = 1

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        body = self._body(node, "body")
        carried = list(inputs[2:])
        if len(body.outputs) < 1 + len(carried):
            raise self.fail(
                node,
                f"the body has {len(body.outputs)} outputs for {len(carried)} loop-carried values",
            )
        outs: list[TensorInfo] = []
        for init, v in zip(carried, body.outputs[1:]):
            body_info = v.info or body.value_info.get(v.name)
            outs.append(_merge(init, body_info) or _typed(body, v.name, None, node))  # type: ignore[arg-type]
        for v in body.outputs[1 + len(carried) :]:
            info = _typed(body, v.name, v.info, node)
            outs.append(TensorInfo(info.dtype, None if info.shape is None else (None, *info.shape)))
        return outs


OPS: list[type[OpDef]] = [If, Loop]
