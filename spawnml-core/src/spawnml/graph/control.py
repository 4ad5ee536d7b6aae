"""If and Loop, orchestrated on the host: the condition and trip count are read on the
host and each body runs as its own graph (placed on the session's backends, plans cached
per shape set like the main graph). Outer-scope values reach a body as extra feeds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInputError, InvalidModelError
from ..op import Node
from ..tensor import DeviceTensor
from .ir import Graph

MAX_LOOP_ITERATIONS = 1 << 24  # a guard against runaway loops in malformed models


def _host(values: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: v.numpy() if isinstance(v, DeviceTensor) else v for k, v in values.items()}


def _run_body(runner: Any, node: Node, attr: str, feeds: dict[str, Any]) -> list[np.ndarray]:
    graph: Graph = node.subgraphs[attr]
    sub = runner.subrunner(id(node), attr, graph)
    names = [v.name for v in graph.outputs]
    results = _host(sub.run(feeds, names))
    return [np.asarray(results[n]) for n in names]


def _scalar(node: Node, what: str, array: np.ndarray | None) -> Any:
    if array is None:
        return None
    a = np.asarray(array)
    if a.size != 1:
        raise InvalidInputError(
            f"{node.describe()}: {what} must hold one element, got shape {a.shape}"
        )
    return a.reshape(()).item()


def run_if(runner: Any, node: Node, inputs: Sequence[np.ndarray | None], outer: dict) -> list:
    cond = _scalar(node, "the condition", inputs[0] if inputs else None)
    if cond is None:
        raise InvalidModelError(f"{node.describe()}: the condition input is required")
    branch = "then_branch" if bool(cond) else "else_branch"
    if branch not in node.subgraphs:
        raise InvalidModelError(f"{node.describe()}: missing attribute {branch!r}")
    return _run_body(runner, node, branch, dict(outer))


def run_loop(runner: Any, node: Node, inputs: Sequence[np.ndarray | None], outer: dict) -> list:
    body = node.subgraphs.get("body")
    if body is None:
        raise InvalidModelError(f"{node.describe()}: missing attribute 'body'")
    trip = _scalar(node, "the trip count M", inputs[0] if len(inputs) > 0 else None)
    cond = _scalar(node, "the condition", inputs[1] if len(inputs) > 1 else None)
    carried = [np.asarray(a) for a in inputs[2:]]
    if trip is None and cond is None:
        raise InvalidModelError(
            f"{node.describe()}: neither a trip count nor a condition is given, so the loop "
            "would never end"
        )
    n_carried = len(carried)
    if len(body.inputs) != 2 + n_carried or len(body.outputs) < 1 + n_carried:
        raise InvalidModelError(
            f"{node.describe()}: the body has {len(body.inputs)} inputs and "
            f"{len(body.outputs)} outputs for {n_carried} loop-carried values"
        )
    limit = MAX_LOOP_ITERATIONS if trip is None else min(int(trip), MAX_LOOP_ITERATIONS)
    keep_going = True if cond is None else bool(cond)
    scans: list[list[np.ndarray]] = [[] for _ in body.outputs[1 + n_carried :]]
    i = 0
    while i < limit and keep_going:
        feeds = dict(outer)
        feeds[body.inputs[0].name] = np.array(i, dtype=np.int64)
        feeds[body.inputs[1].name] = np.array(keep_going, dtype=np.bool_)
        for v, a in zip(body.inputs[2:], carried):
            feeds[v.name] = a
        outs = _run_body(runner, node, "body", feeds)
        keep_going = bool(np.asarray(outs[0]).reshape(-1)[0]) if outs[0].size else False
        carried = outs[1 : 1 + n_carried]
        for acc, a in zip(scans, outs[1 + n_carried :]):
            acc.append(a)
        i += 1
    stacked = []
    for acc, v in zip(scans, body.outputs[1 + n_carried :]):
        if acc:
            stacked.append(np.stack(acc))
        else:
            shape = v.info.shape if v.info is not None and v.info.shape is not None else ()
            dims = tuple(d if isinstance(d, int) else 0 for d in shape)
            dt = v.info.dtype.numpy if v.info is not None else np.float32
            stacked.append(np.zeros((0, *dims), dtype=dt))
    return [*carried, *stacked]


def run_control(runner: Any, node: Node, inputs: Sequence[np.ndarray | None], outer: dict) -> list:
    """Execute a control-flow node; its subgraphs run through ``runner``'s backends."""
    if node.op_type == "If":
        return run_if(runner, node, inputs, outer)
    if node.op_type == "Loop":
        return run_loop(runner, node, inputs, outer)
    raise InvalidModelError(f"{node.describe()}: control-flow op {node.op_type} is not supported")
