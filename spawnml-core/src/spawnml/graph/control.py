"""If, Loop and Scan, orchestrated on the host with the values left where they live.

The condition and trip count are read on the host (one scalar download each); every other
value (outer-scope reads, loop-carried values, Scan states) reaches a body as it is,
a DeviceTensor stays on its device, and each body runs as its own graph on the session's
backends, its plans cached per shape set like the main graph (so a loop's second
iteration replays a recording). Loop and Scan per-step outputs are gathered on the host
and stacked once at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInputError, InvalidModelError
from ..op import Node, TensorInfo
from ..tensor import DeviceTensor
from ..values import TensorSequence
from .ir import Graph
from .scan import ScanLayout

MAX_LOOP_ITERATIONS = 1 << 24  # a guard against runaway loops in malformed models

Value = Any  # a host array or a DeviceTensor


def host(value: Value) -> np.ndarray:
    """``value`` on the host (a DeviceTensor is downloaded, not closed)."""
    return value.numpy() if isinstance(value, DeviceTensor) else np.asarray(value)


def _take_host(value: Value) -> np.ndarray:
    """``value`` on the host; an owned DeviceTensor handle is closed."""
    array = host(value)
    if isinstance(value, DeviceTensor):
        value.close()
    return array


def _close(values: Sequence[Value]) -> None:
    for v in values:
        if isinstance(v, DeviceTensor):
            v.close()


def _run_body(runner: Any, node: Node, attr: str, feeds: dict[str, Value],
              consts: dict[str, np.ndarray]) -> list[Value]:
    """Run one body; device results come back as handles the caller owns."""
    graph: Graph = node.subgraphs[attr]
    sub = runner.subrunner(id(node), attr, graph)
    names = [v.name for v in graph.outputs]
    results = sub.run(feeds, names, keep=True, consts=consts)
    return [results[n] for n in names]


def _scalar(node: Node, what: str, value: Value | None) -> Any:
    if value is None:
        return None
    if int(np.prod(value.shape)) != 1:
        raise InvalidInputError(
            f"{node.describe()}: {what} must hold one element, got shape {tuple(value.shape)}"
        )
    return host(value).reshape(()).item()


def run_if(runner: Any, node: Node, inputs: Sequence[Value | None], outer: dict,
           consts: dict) -> list:
    cond = _scalar(node, "the condition", inputs[0] if inputs else None)
    if cond is None:
        raise InvalidModelError(f"{node.describe()}: the condition input is required")
    branch = "then_branch" if bool(cond) else "else_branch"
    if branch not in node.subgraphs:
        raise InvalidModelError(f"{node.describe()}: missing attribute {branch!r}")
    return _run_body(runner, node, branch, dict(outer), consts)


def _empty_scan(v: Any) -> np.ndarray:
    shape = v.info.shape if v.info is not None and v.info.shape is not None else ()
    dims = tuple(d if isinstance(d, int) else 0 for d in shape)
    dt = v.info.dtype.numpy if v.info is not None else np.float32
    return np.zeros((0, *dims), dtype=dt)


def run_loop(runner: Any, node: Node, inputs: Sequence[Value | None], outer: dict,
           consts: dict) -> list:
    body = node.subgraphs.get("body")
    if body is None:
        raise InvalidModelError(f"{node.describe()}: missing attribute 'body'")
    trip = _scalar(node, "the trip count M", inputs[0] if len(inputs) > 0 else None)
    cond = _scalar(node, "the condition", inputs[1] if len(inputs) > 1 else None)
    carried: list[Value] = list(inputs[2:])
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
    owned = False  # whether ``carried`` holds handles of ours (not the node's inputs)
    i = 0
    try:
        while i < limit and keep_going:
            feeds = dict(outer)
            feeds[body.inputs[0].name] = np.array(i, dtype=np.int64)
            feeds[body.inputs[1].name] = np.array(keep_going, dtype=np.bool_)
            for v, a in zip(body.inputs[2:], carried):
                feeds[v.name] = a
            outs = _run_body(runner, node, "body", feeds, consts)
            if owned:
                _close(carried)
            carried, owned = outs[1 : 1 + n_carried], True
            keep_going = bool(_take_host(outs[0]).reshape(-1)[:1].any())
            for acc, a in zip(scans, outs[1 + n_carried :]):
                acc.append(_take_host(a))
            i += 1
    except BaseException:
        if owned:
            _close(carried)
        raise
    if not owned:  # no iteration ran: the results are new handles on the inputs
        carried = [a.share() if isinstance(a, DeviceTensor) else a for a in carried]
    stacked = [np.stack(acc) if acc else _empty_scan(v)
               for acc, v in zip(scans, body.outputs[1 + n_carried :])]  # fmt: skip
    return [*carried, *stacked]


def _step(a: np.ndarray, axis: int, t: int, reverse: bool) -> np.ndarray:
    index = a.shape[axis] - 1 - t if reverse else t
    return np.take(a, index, axis=axis)


def _stack(slices: list[np.ndarray], axis: int, reverse: bool) -> np.ndarray:
    return np.stack(slices[::-1] if reverse else slices, axis=axis)


def _scan_once(runner: Any, node: Node, layout: ScanLayout, states: list[Value],
               sequences: list[np.ndarray], steps: int, outer: dict,
               consts: dict) -> tuple[list, list]:
    """One scan over ``steps`` slices (Scan 8: one batch element): final states and the
    per-step outputs, each as a host list."""
    body = node.subgraphs["body"]
    n = layout.n_states
    outs_per_k: list[list[np.ndarray]] = [[] for _ in body.outputs[n:]]
    owned = False
    axes = [a - 1 if layout.batched else a for a in layout.input_axes]
    try:
        for t in range(steps):
            feeds = dict(outer)
            for v, s in zip(body.inputs[:n], states):
                feeds[v.name] = s
            for k, v in enumerate(body.inputs[n:]):
                feeds[v.name] = _step(sequences[k], axes[k], t, layout.input_reverse[k])
            outs = _run_body(runner, node, "body", feeds, consts)
            if owned:
                _close(states)
            states, owned = outs[:n], True
            for acc, a in zip(outs_per_k, outs[n:]):
                acc.append(_take_host(a))
    except BaseException:
        if owned:
            _close(states)
        raise
    if not owned:
        states = [a.share() if isinstance(a, DeviceTensor) else a for a in states]
    return states, outs_per_k


def run_scan(runner: Any, node: Node, inputs: Sequence[Value | None], outer: dict,
           consts: dict) -> list:
    body = node.subgraphs.get("body")
    if body is None:
        raise InvalidModelError(f"{node.describe()}: missing attribute 'body'")
    shapes = [None if a is None else tuple(a.shape) for a in inputs]
    layout = ScanLayout.of(node, body, shapes)
    steps = layout.length(shapes)
    sequences = [host(inputs[i]) for i in layout.scan_inputs]
    states = [inputs[i] for i in layout.state_inputs]
    if steps is None:
        raise InvalidModelError(f"{node.describe()}: the scan inputs have no common length")
    if not layout.batched:
        states, per_k = _scan_once(runner, node, layout, states, sequences, steps, outer,
                                   consts)
        stacked = [_stack(acc, layout.output_axis(k, acc[0].ndim), layout.output_reverse[k])
                   if acc else _empty_scan(body.outputs[layout.n_states + k])
                   for k, acc in enumerate(per_k)]  # fmt: skip
        return [*states, *stacked]
    return _run_scan8(runner, node, layout, [host(s) for s in states], sequences, steps,
                      (outer, consts), host(inputs[0]) if layout.has_lengths else None)  # fmt: skip


def _run_scan8(runner: Any, node: Node, layout: ScanLayout, states: list[np.ndarray],
               sequences: list[np.ndarray], steps: int, scope: tuple[dict, dict],
               lengths: np.ndarray | None) -> list:
    """Scan 8: each batch element scanned on its own (up to its sequence length; later
    steps of its scan outputs are zeros), the results stacked along the batch axis."""
    batch = sequences[0].shape[0]
    finals: list[list[np.ndarray]] = [[] for _ in states]
    scans: list[list[np.ndarray]] = []
    for b in range(batch):
        length = steps if lengths is None else int(lengths.reshape(-1)[b])
        if not 0 <= length <= steps:
            raise InvalidInputError(f"{node.describe()}: sequence_lens[{b}]={length} is outside "
                                    f"[0, {steps}]")  # fmt: skip
        got, per_k = _scan_once(runner, node, layout, [s[b] for s in states],
                                [q[b] for q in sequences], length, *scope)  # fmt: skip
        for acc, s in zip(finals, got):
            acc.append(_take_host(s))
        if b == 0:
            scans = [[] for _ in per_k]
        for acc, slices in zip(scans, per_k):
            padded = slices + [np.zeros_like(slices[0])] * (steps - length) if slices else []
            acc.append(np.stack(padded) if padded else None)
    outputs = [np.stack(acc) for acc in finals]
    for acc in scans:
        if any(a is None for a in acc):
            raise InvalidModelError(f"{node.describe()}: Scan 8 with an empty sequence is not "
                                    "supported")  # fmt: skip
        outputs.append(np.stack(acc))
    return outputs


def run_sequence_map(runner: Any, node: Node, inputs: Sequence[Value | None], outer: dict,
                     consts: dict) -> list:
    """The body once per position of the input sequences (tensor inputs as they are);
    each body output collected into a sequence."""
    body = node.subgraphs.get("body")
    if body is None:
        raise InvalidModelError(f"{node.describe()}: missing attribute 'body'")
    if len(body.inputs) != len(inputs):
        raise InvalidModelError(f"{node.describe()}: the body has {len(body.inputs)} inputs "
                                f"for {len(inputs)} node inputs")  # fmt: skip
    lengths = {len(v) for v in inputs if isinstance(v, list)}
    if not isinstance(inputs[0], list) or len(lengths) != 1:
        raise InvalidInputError(f"{node.describe()}: the input sequences must have one length, "
                                f"got {sorted(lengths)}")  # fmt: skip
    collected: list[list[np.ndarray]] = [[] for _ in body.outputs]
    for i in range(lengths.pop()):
        feeds = dict(outer)
        for v, value in zip(body.inputs, inputs):
            feeds[v.name] = value[i] if isinstance(value, list) else value
        for acc, out in zip(collected, _run_body(runner, node, "body", feeds, consts)):
            acc.append(_take_host(out))
    return [TensorSequence(acc, _declared_dtype(v)) for acc, v in zip(collected, body.outputs)]


def _declared_dtype(v: Any) -> Any:
    return v.info.dtype if isinstance(v.info, TensorInfo) else None


def run_control(runner: Any, node: Node, inputs: Sequence[Value | None], outer: dict,
                consts: dict) -> list:
    """Execute a control-flow node; its subgraphs run through ``runner``'s backends. Device
    results are handles the caller owns."""
    run = {"If": run_if, "Loop": run_loop, "Scan": run_scan,
           "SequenceMap": run_sequence_map}.get(node.op_type)
    if run is None:
        raise InvalidModelError(
            f"{node.describe()}: control-flow op {node.op_type} is not supported"
        )
    return run(runner, node, inputs, outer, consts)
