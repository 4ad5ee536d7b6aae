"""The decoder graph extended with what each generation step needs from the device, so a
step is one model run (one recorded replay) with no helper session:

* ``spawnml.last_logits`` [vocab]: the last position's logits (batch 0);
* ``spawnml.next_token`` [1] int64: their argmax (greedy decoding on a device);
* for a windowed cache, ``<present>.spawnml.window``: each present tensor without its
  first position, the next step's past window (see :mod:`.kv_cache`).

The layout is read from the ONNX graph's signature (:class:`ProtoSignature`), before the
session is made from the extended graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spawnml.session import NodeArg

LAST_LOGITS = "spawnml.last_logits"
NEXT_TOKEN = "spawnml.next_token"
_WINDOW = ".spawnml.window"
_TYPES = {1: "tensor(float)", 10: "tensor(float16)", 11: "tensor(double)", 6: "tensor(int32)",
          7: "tensor(int64)"}
_INT64_MAX = np.iinfo(np.int64).max


def window_name(present: str) -> str:
    """The extra output holding ``present`` without its first cache position."""
    return present + _WINDOW


def _arg(value: Any) -> NodeArg:
    tensor = value.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tensor.shape.dim]
    return NodeArg(value.name, shape, _TYPES.get(tensor.elem_type, "tensor(float)"))


class ProtoSignature:
    """``get_inputs``/``get_outputs`` of an ONNX ModelProto, as an InferenceSession gives
    them (what :func:`.layout.discover_layout` reads)."""

    def __init__(self, proto: Any) -> None:
        inits = {t.name for t in proto.graph.initializer}
        self._inputs = [_arg(v) for v in proto.graph.input if v.name not in inits]
        self._outputs = [_arg(v) for v in proto.graph.output]
        self.op_types = {n.op_type for n in proto.graph.node}

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)


def _const(name: str, values: list[int]) -> Any:
    from onnx import helper, numpy_helper

    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(values, np.int64), name))


def extend_for_decoding(proto: Any, logits: str, present: tuple[str, ...],
                        windowed: bool) -> None:
    """Add the last-logits, next-token and (``windowed``) window outputs to ``proto``'s
    graph, in place."""
    from onnx import TensorProto, helper

    graph, p = proto.graph, "spawnml.decode."
    elem = next((o.type.tensor_type.elem_type for o in graph.output if o.name == logits),
                TensorProto.FLOAT)
    nodes = [_const(p + "last", [-1]), _const(p + "end", [_INT64_MAX]), _const(p + "one", [1]),
             _const(p + "axis1", [1]), _const(p + "axis2", [2]), _const(p + "flat", [-1]),
             helper.make_node("Slice", [logits, p + "last", p + "end", p + "axis1"],
                              [p + "sliced"]),
             helper.make_node("Reshape", [p + "sliced", p + "flat"], [LAST_LOGITS]),
             helper.make_node("ArgMax", [LAST_LOGITS], [NEXT_TOKEN], axis=0, keepdims=1)]
    outputs = [helper.make_tensor_value_info(LAST_LOGITS, elem, ["vocab"]),
               helper.make_tensor_value_info(NEXT_TOKEN, TensorProto.INT64, [1])]
    if windowed:
        for name in present:
            nodes.append(helper.make_node("Slice", [name, p + "one", p + "end", p + "axis2"],
                                          [window_name(name)]))
            outputs.append(helper.make_empty_tensor_value_info(window_name(name)))
    graph.node.extend(nodes)
    graph.output.extend(outputs)
