"""FlexAttention with ``score_mod`` / ``prob_mod`` graphs as a function body of primitive
operators, which the session inlines in place of the node (``spawnml.graph.expand``).

Each modifier takes the whole (B, Hq, L, S) score or probability tensor and returns one of
the same shape and type (the ONNX spec), so its body is inlined once, between the scores'
MatMul and the Softmax, or between the Softmax and the MatMul with V: every backend then runs
it with its portable kernels, folded and fused like any other nodes, with no host round trip.

The body follows ONNX's own function for the op, with one change: K and V are broadcast to
the query heads of their group by 5-D MatMuls (Q reshaped to (B, Hkv, group, L, E)) instead
of being copied per head. A node without graph attributes keeps the fused attention kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError
from spawnml.graph.expand import EXPANSION_OPSET, fresh_prefix, inline_graph
from spawnml.graph.ir import Graph, Value
from spawnml.op import Node, TensorInfo

MODIFIERS = ("score_mod", "prob_mod")
# softmax_precision: the TensorProto element types the spec allows
_PRECISIONS = {DType.float32.onnx, DType.float16.onnx, DType.float64.onnx, DType.bfloat16.onnx}


class _Body:
    """A function body under construction. Its names all start with a prefix that no name
    the modifier graphs read from outer scopes starts with, so none is captured."""

    def __init__(self, node: Node) -> None:
        reads = set().union(*(g.outer_names() for g in node.subgraphs.values()))
        self.prefix = fresh_prefix("flex", reads)
        self.q, self.k, self.v = (self.prefix + n for n in "QKV")
        self.y = self.prefix + "Y"
        self.graph = Graph([], [Value(n, None) for n in (self.q, self.k, self.v)],
                           [Value(self.y, None)])

    def op(self, op_type: str, *inputs: str, out: str = "", **attrs: object) -> str:
        """Append a node; returns its (only) output name."""
        out = out or f"{self.prefix}{op_type}_{len(self.graph.nodes)}"
        self.graph.nodes.append(Node(op_type, list(inputs), [out], dict(attrs), name=out,
                                     opset=EXPANSION_OPSET))
        return out

    def const(self, name: str, array: np.ndarray) -> str:
        """Add an initializer."""
        self.graph.initializers[self.prefix + name] = array
        return self.prefix + name

    def dims(self, tensor: str, *axes: int) -> list[str]:
        """One 1-element int64 tensor per axis of ``tensor``: its size."""
        return [self.op("Shape", tensor, start=a, end=a + 1) for a in axes]

    def modify(self, node: Node, attr: str, value: str) -> str:
        """``value`` through the node's modifier graph ``attr`` (inlined), if it has one."""
        body = node.subgraphs.get(attr)
        if body is None:
            return value
        out = f"{self.prefix}{attr}_out"
        inlined = inline_graph(body, [value], [out], f"{self.prefix}{attr}/")
        self.graph.nodes.extend(inlined.absorb_into(self.graph))
        return out


def check_modifier(node: Node, attr: str, body: Graph) -> None:
    """InvalidModelError unless the modifier graph maps one rank-4 tensor to one."""
    if len(body.inputs) != 1 or len(body.outputs) != 1:
        raise InvalidModelError(
            f"{node.describe()}: attribute {attr!r} must be a graph with 1 input and 1 output "
            f"(the (B, Hq, L, S) tensor), got {len(body.inputs)} input(s) and "
            f"{len(body.outputs)} output(s)"
        )
    for what, v in (("input", body.inputs[0]), ("output", body.outputs[0])):
        shape = getattr(v.info, "shape", None)
        if shape is not None and len(shape) != 4:
            raise InvalidModelError(
                f"{node.describe()}: the {what} {v.name!r} of attribute {attr!r} must be rank 4 "
                f"(B, Hq, L, S), the graph declares shape {tuple(shape)}"
            )


def softmax_type(node: Node, q: TensorInfo | None) -> int:
    """The TensorProto element type of the scores and probabilities: ``softmax_precision``,
    else double for double inputs and float32 otherwise (also where Q's type is unknown)."""
    precision = node.attrs.get("softmax_precision")
    if precision is not None:
        if int(precision) not in _PRECISIONS:
            raise InvalidModelError(f"{node.describe()}: softmax_precision {precision} is not a "
                                    "float type (1, 10, 11 or 16)")
        return int(precision)
    wide = q is not None and q.dtype == DType.float64
    return DType.float64.onnx if wide else DType.float32.onnx


def _sqrt_scale(b: _Body, node: Node, head: str) -> str:
    """sqrt(scale) in Q's type: the ``scale`` attribute, else 1/sqrt(head size)."""
    scale = node.attrs.get("scale")
    if scale is not None:
        root = b.const("sqrt_scale", np.array(np.sqrt(np.float32(scale)), np.float32))
    else:
        size = b.op("Cast", head, to=DType.float32.onnx)
        root = b.op("Sqrt", b.op("Reciprocal", b.op("Sqrt", size)))
    return b.op("CastLike", root, b.q)


def flex_body(node: Node, inputs: Sequence[TensorInfo | None]) -> Graph:
    """The function body of a FlexAttention node with modifier graphs (see the module doc)."""
    for attr in MODIFIERS:
        if attr in node.subgraphs:
            check_modifier(node, attr, node.subgraphs[attr])
    work = softmax_type(node, inputs[0] if inputs else None)
    b = _Body(node)
    batch, hq, seq, head = b.dims(b.q, 0, 1, 2, 3)
    hkv, kv_seq = b.dims(b.k, 1, 2)
    (v_head,) = b.dims(b.v, 3)
    group = b.const("group", np.array([-1], np.int64))
    axis2 = b.const("axis2", np.array([2], np.int64))

    def shape(*dims: str) -> str:
        return b.op("Concat", *dims, axis=0)

    root = _sqrt_scale(b, node, head)
    q5 = b.op("Reshape", b.op("Mul", b.q, root), shape(batch, hkv, group, seq, head))
    k5 = b.op("Unsqueeze", b.op("Mul", b.k, root), axis2)
    scores = b.op("MatMul", q5, b.op("Transpose", k5, perm=(0, 1, 2, 4, 3)))
    scores = b.op("Cast", b.op("Reshape", scores, shape(batch, hq, seq, kv_seq)), to=work)
    probs = b.op("Softmax", b.modify(node, "score_mod", scores), axis=-1)
    probs = b.modify(node, "prob_mod", probs)
    p5 = b.op("Reshape", probs, shape(batch, hkv, group, seq, kv_seq))
    v5 = b.op("Cast", b.op("Unsqueeze", b.v, axis2), to=work)
    y = b.op("Reshape", b.op("MatMul", p5, v5), shape(batch, hq, seq, v_head))
    b.op("CastLike", y, b.v, out=b.y)
    return b.graph
