"""Shape-independent graph passes run once at session creation: expansion of nodes into
the function bodies their ops give (``expand``), dead-node removal,
Conv+BatchNormalization folding and activation fusion. (Constant folding and shape
inference depend on input shapes and run per shape set: see ``plan.specialise``.)"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .expand import expand_nodes
from .fusion import fuse_activations
from .ir import Graph, node_reads


@dataclass
class PassReport:
    """What the passes changed."""

    expanded: int = 0
    dead_nodes: int = 0
    conv_bn_folded: int = 0
    activations_fused: int = 0


def remove_dead_nodes(graph: Graph) -> int:
    """Drop nodes none of whose outputs reach a graph output; returns how many."""
    needed = {v.name for v in graph.outputs}
    keep = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs if o):
            keep.append(node)
            needed.update(node_reads(node))
    removed = len(graph.nodes) - len(keep)
    graph.nodes = list(reversed(keep))
    graph.initializers = {k: v for k, v in graph.initializers.items() if k in needed}
    return removed


def fold_conv_batchnorm(graph: Graph) -> int:
    """Fold ``BatchNormalization(Conv(x, W, B))`` into the Conv's weights when every BN
    parameter and W/B are initializers and the Conv output feeds only the BN (inference).

    W' = W * s, B' = (B - mean) * s + bias with s = scale / sqrt(var + eps) per channel."""
    consumers = graph.consumers()
    producers = graph.producers()
    outputs = {v.name for v in graph.outputs}
    init = graph.initializers
    removed: set[int] = set()
    count = 0
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain or len(bn.inputs) < 5:
            continue
        if len([o for o in bn.outputs if o]) != 1 or bn.attrs.get("training_mode", 0):
            continue
        conv = producers.get(bn.inputs[0])
        if conv is None or conv.op_type != "Conv" or conv.domain or bn.inputs[0] in outputs:
            continue
        if len(consumers.get(bn.inputs[0], [])) != 1 or len(conv.inputs) < 2:
            continue
        params = bn.inputs[1:5]
        w_name = conv.inputs[1]
        b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
        if (
            not all(p in init for p in params)
            or w_name not in init
            or (b_name and b_name not in init)
        ):
            continue
        w = init[w_name]
        if not np.issubdtype(w.dtype, np.floating) or w.ndim < 3:
            continue
        scale, bias, mean, var = (init[p].astype(np.float64) for p in params)
        s = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        if s.shape != (w.shape[0],):
            continue
        b = init[b_name].astype(np.float64) if b_name else np.zeros(w.shape[0])
        new_w = (w.astype(np.float64) * s.reshape(-1, *[1] * (w.ndim - 1))).astype(w.dtype)
        new_b = ((b - mean) * s + bias).astype(w.dtype)
        tag = f"{conv.name or w_name}__bnfold"
        init[f"{tag}_W"], init[f"{tag}_B"] = new_w, new_b
        conv.inputs = [conv.inputs[0], f"{tag}_W", f"{tag}_B"]
        conv.outputs = [bn.outputs[0]]
        removed.add(id(bn))
        count += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    if count:
        remove_dead_nodes(graph)  # drops the now unused original weights
    return count


def optimise(graph: Graph, *, fuse: bool = True) -> PassReport:
    """Run the shape-independent passes in place."""
    report = PassReport()
    report.expanded = expand_nodes(graph)  # needed to run the nodes: done even unoptimised
    report.dead_nodes = remove_dead_nodes(graph)
    if fuse:
        report.conv_bn_folded = fold_conv_batchnorm(graph)
        report.activations_fused = fuse_activations(graph, {v.name for v in graph.outputs})
    return report
