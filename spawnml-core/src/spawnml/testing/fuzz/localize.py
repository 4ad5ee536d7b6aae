"""Find the first node whose output differs, to group a mismatch by the op that causes it.

The model is rerun with every node output exposed as a graph output (types from onnx's
shape inference); walking the nodes in graph order, the first output that differs between
spawnml and onnxruntime belongs to the node to blame, since its inputs matched. Exposing
outputs can change what spawnml fuses, so a mismatch that only a fused kernel shows may not
be found: then the caller falls back to the node producing the differing graph output.
"""

from __future__ import annotations

import numpy as np
import onnx

from .oracle import Feeds, SpawnRunner, compare, run_onnxruntime


def expose_all(model: bytes) -> tuple[bytes, list[onnx.NodeProto]]:
    """The model with each node output (whose type inference knows) as a graph output, and
    its nodes in graph order."""
    proto = onnx.ModelProto.FromString(model)
    inferred = onnx.shape_inference.infer_shapes(proto)
    known = {vi.name: vi for vi in inferred.graph.value_info}
    present = {o.name for o in proto.graph.output}
    for node in proto.graph.node:
        for name in node.output:
            if name and name not in present and name in known:
                proto.graph.output.append(known[name])
                present.add(name)
    return proto.SerializeToString(), list(proto.graph.node)


def first_divergent(model: bytes, feeds: Feeds, backend: str,
                    runner: SpawnRunner) -> tuple[str, str, str] | None:
    """(op type, node name, difference) of the first node whose output spawnml computes
    differently from onnxruntime, or None where none is found (or the rerun fails)."""
    try:
        exposed, nodes = expose_all(model)
        names = [o.name for o in onnx.ModelProto.FromString(exposed).graph.output]
        copy = {k: np.array(v, copy=True) for k, v in feeds.items()}
        got = dict(zip(names, runner(exposed, copy, backend)[0]))
        want = dict(zip(names, run_onnxruntime(exposed, feeds)))
    except Exception:  # noqa: BLE001 - no localisation: the caller keeps its own grouping
        return None
    for node in nodes:
        for name in node.output:
            if name in got and name in want:
                diff = compare(want[name], got[name])
                if diff is not None:
                    return node.op_type, node.name, diff
    return None
