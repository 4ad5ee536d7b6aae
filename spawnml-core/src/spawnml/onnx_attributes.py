"""ONNX NodeProto -> spawnml Node (attribute values as plain Python / numpy)."""

from __future__ import annotations

from typing import Any

import numpy as np


def attribute_value(attr: Any) -> Any:
    """A NodeProto attribute as Python: ints, floats, str, tuples, numpy arrays, GraphProtos."""
    from onnx import helper, numpy_helper

    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        items = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value]
        if items and hasattr(items[0], "dims") and hasattr(items[0], "data_type"):
            return tuple(numpy_helper.to_array(v) for v in items)
        return tuple(items)
    if hasattr(value, "dims") and hasattr(value, "data_type"):  # TensorProto
        return numpy_helper.to_array(value)
    if hasattr(value, "values") and hasattr(value, "indices"):  # SparseTensorProto
        from onnx import numpy_helper as nh

        dense = np.zeros(tuple(value.dims), dtype=nh.to_array(value.values).dtype)
        idx = nh.to_array(value.indices)
        vals = nh.to_array(value.values)
        if idx.ndim == 1:
            dense.reshape(-1)[idx] = vals
        else:
            dense[tuple(idx.T)] = vals
        return dense
    return value  # int, float, GraphProto, TypeProto


def node_from_proto(proto: Any, opset: int) -> Any:
    """A :class:`spawnml.op.Node` for a NodeProto at the model's opset (subgraphs left as
    GraphProto values in ``attrs``; the graph importer converts them)."""
    from .op import Node

    attrs = {a.name: attribute_value(a) for a in proto.attribute}
    return Node(
        op_type=proto.op_type,
        inputs=list(proto.input),
        outputs=list(proto.output),
        attrs=attrs,
        name=proto.name,
        domain=proto.domain,
        opset=opset,
    )
