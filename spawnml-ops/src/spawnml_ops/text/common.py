"""Helpers shared by the string ops: input checks and string arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpDef, TensorInfo


def string_input(op: OpDef, node: Node, inputs: Sequence[TensorInfo | None], index: int = 0,
                 name: str = "X") -> TensorInfo:
    """Input ``index``, required and of element type string (InvalidModelError otherwise)."""
    info = inputs[index] if len(inputs) > index else None
    if info is None:
        raise op.fail(node, f"input {name} is required")
    if not info.dtype.is_string:
        raise op.fail(node, f"input {name} must be a string tensor, got {info.dtype}")
    return info


def strings(shape: Sequence[int], values: Sequence[str] | None = None) -> np.ndarray:
    """An object array of str of ``shape`` (filled with ``values``, else empty strings)."""
    out = np.empty(tuple(shape), dtype=object)
    out.reshape(-1)[:] = list(values) if values is not None else [""] * out.size
    return out


def as_str(x: np.ndarray) -> np.ndarray:
    """``x`` as an object array of str (bytes decoded as UTF-8)."""
    from spawnml.dtypes import as_string_array

    return as_string_array(x)


STRING = DType.string
