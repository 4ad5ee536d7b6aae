"""The output types of If, Loop and Scan nodes, found when the enclosing plan is made.

A body is specialised (inferred and folded, not placed) with the concrete infos of the
values it reads from the enclosing scope and of its own inputs, so a branch output declared
without a type, or a Conv inside a branch fed by the outer graph, gets its shape from the
feeds. Both branches of an If whose condition is not a constant are inferred; where they
disagree the dims become unknown and the nodes after the If are specialised when they run.
A Loop body is re-inferred until its loop-carried types stop changing (dims that change
per iteration become unknown). Anything a body cannot infer falls back to the declared
types, or to "unknown" (None), never to an error at planning time: the body is specialised
again, with real values, each time it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import DType
from ..errors import InvalidModelError, SpawnMLError
from ..op import Node, TensorInfo
from ..values import SequenceInfo, ValueInfo
from .ir import Graph

Info = ValueInfo | None
MAX_LOOP_ROUNDS = 4  # re-inferences of a Loop body before its changing dims become unknown


def merge(a: Info, b: Info) -> Info:
    """What two values that may flow to one name have in common (None: unknown)."""
    if isinstance(a, SequenceInfo) and isinstance(b, SequenceInfo):
        return SequenceInfo(merge(a.elem, b.elem))  # type: ignore[arg-type]
    if not isinstance(a, TensorInfo | None) or not isinstance(b, TensorInfo | None):
        return a if a == b else None
    if a is None or b is None:
        known = a or b
        return None if known is None else TensorInfo(known.dtype, None)
    if a.dtype != b.dtype:
        return None
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorInfo(a.dtype, None)
    return TensorInfo(a.dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))


def body_outputs(
    body: Graph,
    inputs: dict[str, Info],
    scope: dict[str, Info],
    consts: dict[str, np.ndarray],
) -> list[Info]:
    """The infos of ``body``'s outputs for these body-input and enclosing-scope infos."""
    from .plan import specialise  # plan imports this module

    feeds = {n: i for n, i in {**scope, **inputs}.items() if i is not None}
    unknown = {n for n, i in {**scope, **inputs}.items() if i is None}
    outer = {n: a for n, a in consts.items() if n not in inputs}
    try:
        spec = specialise(body, feeds, (), outer, None, place=False, unknown=unknown)
    except SpawnMLError:  # e.g. a branch these shapes never take: it is checked when it runs
        return [v.info or body.value_info.get(v.name) for v in body.outputs]
    found = []
    for v in body.outputs:
        info = spec.infos.get(v.name)
        found.append(info if info is not None else v.info or body.value_info.get(v.name))
    return found


def _scope(graph: Graph, infos: dict[str, Info]) -> dict[str, Info]:
    """The infos of the names ``graph`` reads from enclosing scopes (None: unknown)."""
    return {n: infos.get(n) for n in graph.outer_names()}


def _body(node: Node, attr: str) -> Graph:
    graph = node.subgraphs.get(attr)
    if graph is None:
        raise InvalidModelError(f"{node.describe()}: missing required graph attribute {attr!r}")
    return graph


def _const_scalar(value: np.ndarray | None) -> object:
    if value is None or np.asarray(value).size != 1:
        return None
    return np.asarray(value).reshape(()).item()


def if_outputs(node: Node, ins: Sequence[Info], vals: Sequence[np.ndarray | None],
               infos: dict[str, Info], consts: dict[str, np.ndarray]) -> list[Info]:
    """Both branches (or the one a constant condition picks), merged."""
    then_g, else_g = _body(node, "then_branch"), _body(node, "else_branch")
    if len(then_g.outputs) != len(else_g.outputs):
        raise InvalidModelError(
            f"{node.describe()}: then_branch has {len(then_g.outputs)} outputs, "
            f"else_branch {len(else_g.outputs)}"
        )
    cond = _const_scalar(vals[0] if vals else None)
    branches = [then_g, else_g] if cond is None else [then_g if cond else else_g]
    results = [body_outputs(g, {}, _scope(g, infos), consts) for g in branches]
    if len(results) == 1:
        return results[0]
    return [_merge_branches(a, b) for a, b in zip(*results)]


def _merge_branches(a: Info, b: Info) -> Info:
    # An untyped branch output that could not be inferred takes the other branch's dtype.
    if isinstance(a, TensorInfo) and isinstance(b, TensorInfo) and a.dtype != b.dtype:
        return TensorInfo(a.dtype, None)
    return merge(a, b)


def loop_outputs(node: Node, ins: Sequence[Info], vals: Sequence[np.ndarray | None],
                 infos: dict[str, Info], consts: dict[str, np.ndarray]) -> list[Info]:
    """Loop-carried types at their fixed point, then the scan outputs with a leading dim."""
    body = _body(node, "body")
    carried = list(ins[2:])
    if len(body.inputs) != 2 + len(carried) or len(body.outputs) < 1 + len(carried):
        raise InvalidModelError(
            f"{node.describe()}: the body has {len(body.inputs)} inputs and "
            f"{len(body.outputs)} outputs for {len(carried)} loop-carried values"
        )
    scope = _scope(body, infos)
    counters = {
        body.inputs[0].name: TensorInfo(DType.int64, ()),
        body.inputs[1].name: TensorInfo(DType.bool, ()),
    }
    outs: list[Info] = []
    for _ in range(MAX_LOOP_ROUNDS):
        feeds = {**counters, **{v.name: i for v, i in zip(body.inputs[2:], carried)}}
        outs = body_outputs(body, feeds, scope, consts)
        merged = [merge(c, o) for c, o in zip(carried, outs[1 : 1 + len(carried)])]
        if merged == carried:
            break
        carried = merged
    else:
        carried = [TensorInfo(c.dtype, None) if isinstance(c, TensorInfo) else None
                   for c in carried]  # fmt: skip
    trips = _const_scalar(vals[0] if vals else None)
    counted = trips if isinstance(trips, int) and (len(ins) < 2 or ins[1] is None) else None
    scans = [TensorInfo(o.dtype, (counted, *o.shape))
             if isinstance(o, TensorInfo) and o.shape is not None else None
             for o in outs[1 + len(carried):]]  # fmt: skip
    return [*carried, *scans]


def scan_outputs(node: Node, ins: Sequence[Info], vals: Sequence[np.ndarray | None],
                 infos: dict[str, Info], consts: dict[str, np.ndarray]) -> list[Info]:
    """Final states, and each scan output with the sequence length at its axis."""
    from .scan import ScanLayout

    body = _body(node, "body")
    shapes = [i.shape if i is not None else None for i in ins]
    layout = ScanLayout.of(node, body, shapes)
    steps = layout.length(shapes)
    first = shapes[layout.scan_inputs[0]]
    batch = first[0] if layout.batched and first else None
    feeds: dict[str, Info] = {}
    for v, info in zip(body.inputs[: layout.n_states], [ins[i] for i in layout.state_inputs]):
        feeds[v.name] = None if info is None else layout.state_slice(info)
    for k, v in enumerate(body.inputs[layout.n_states :]):
        info = ins[layout.scan_inputs[k]]
        feeds[v.name] = None if info is None else layout.input_slice(k, info)
    outs = body_outputs(body, feeds, _scope(body, infos), consts)
    states = [layout.state_output(o, batch) if o is not None else None
              for o in outs[: layout.n_states]]  # fmt: skip
    scans = [layout.output_stack(k, o, steps, batch) if o is not None else None
             for k, o in enumerate(outs[layout.n_states :])]  # fmt: skip
    return [*states, *scans]


def sequence_map_outputs(node: Node, ins: Sequence[Info], vals: Sequence[np.ndarray | None],
                         infos: dict[str, Info], consts: dict[str, np.ndarray]) -> list[Info]:
    """One sequence per body output; the body sees one element of each input sequence."""
    body = _body(node, "body")
    if len(body.inputs) != len(ins):
        raise InvalidModelError(f"{node.describe()}: the body has {len(body.inputs)} inputs "
                                f"for {len(ins)} node inputs")  # fmt: skip
    feeds = {v.name: i.elem if isinstance(i, SequenceInfo) else i
             for v, i in zip(body.inputs, ins)}  # fmt: skip
    outs = body_outputs(body, feeds, _scope(body, infos), consts)
    return [SequenceInfo(o if isinstance(o, TensorInfo) else None) for o in outs]


def control_outputs(node: Node, ins: Sequence[Info], vals: Sequence[np.ndarray | None],
                    infos: dict[str, Info], consts: dict[str, np.ndarray]) -> list[Info]:
    """The output infos of an If, Loop or Scan node in this scope."""
    rule = {"If": if_outputs, "Loop": loop_outputs, "Scan": scan_outputs,
            "SequenceMap": sequence_map_outputs}.get(node.op_type)
    if rule is None:
        raise InvalidModelError(f"{node.describe()}: {node.op_type} has no subgraph rule")
    return rule(node, ins, vals, infos, consts)
