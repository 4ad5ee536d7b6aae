"""What the com.microsoft operators share: the domain, input checks and random case data."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpDef, TensorInfo

from ..common import static_shape

DOMAIN = "com.microsoft"
"""onnxruntime's contrib-operator domain."""

FLOATS = (DType.float32, DType.float16)
"""Element types the contrib ops accept (onnxruntime's CPU kernels: float, most also half)."""


def rand(seed: int, *shape: int, dtype=np.float32) -> np.ndarray:
    """Standard-normal case data."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def optional(inputs: Sequence[TensorInfo | None], i: int) -> TensorInfo | None:
    """Input ``i``, or None when it is omitted (absent or an empty name)."""
    return inputs[i] if len(inputs) > i else None


def float_input(op: OpDef, node: Node, inputs: Sequence[TensorInfo | None], i: int,
                name: str, dtypes: Sequence[DType] = FLOATS) -> tuple[int, ...]:
    """The static shape of required float input ``i``; raises naming the node otherwise."""
    info = optional(inputs, i)
    if info is None:
        raise op.fail(node, f"input {i} ({name}) is required")
    if info.dtype not in dtypes:
        raise op.fail(node, f"input {name} has dtype {info.dtype}, expected one of "
                            f"{[str(d) for d in dtypes]}")
    if not info.is_static:
        raise op.fail(node, f"input {name} needs a static shape, got {info.shape}")
    return static_shape(info)


def same_type(op: OpDef, node: Node, inputs: Sequence[TensorInfo | None],
              names: Sequence[tuple[int, str]]) -> None:
    """Inputs named by (index, name) that are present share input 0's dtype."""
    dt = inputs[0].dtype  # type: ignore[union-attr]
    for i, name in names:
        info = optional(inputs, i)
        if info is not None and info.dtype != dt:
            raise op.fail(node, f"input {name} has dtype {info.dtype}, expected {dt}")


def int_attr(op: OpDef, node: Node, name: str, default: int | None = None, *,
             choices: Sequence[int] | None = None, required: bool = False) -> int:
    """An integer attribute, checked against ``choices`` when given."""
    v = op.attr(node, name, default, required=required)
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise op.fail(node, f"attribute {name!r} must be an integer, got {v!r}")
    if choices is not None and int(v) not in choices:
        raise op.fail(node, f"attribute {name!r} = {v} is not supported (expected one of "
                            f"{list(choices)})")
    return int(v)


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether ``shape`` broadcasts (numpy rules) to exactly ``target``."""
    try:
        return tuple(np.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except ValueError:
        return False


def float_attr(op: OpDef, node: Node, name: str, default: float) -> float:
    """A float attribute (an integer value is accepted)."""
    v = op.attr(node, name, default)
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
        raise op.fail(node, f"attribute {name!r} must be a float, got {v!r}")
    return float(v)
