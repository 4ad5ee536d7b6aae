"""Axis and shape-value helpers shared by the reduction, softmax and data-movement ops."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.kernel import Output, Tensor, cast, helper, kernel
from spawnml.op import HostOnly, Node, OpDef, TensorInfo

from .common import normalize_axis, static_shape


def prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def input_ints(
    op: OpDef, node: Node, values: Sequence[np.ndarray | None], index: int
) -> list[int] | None:
    """The integer values of input ``index`` (a shape-like input: ONNX makes every one a 1-D
    or 0-D tensor), or None if unknown/omitted.

    Omitted inputs give None too: callers distinguish with ``has_input``."""
    if index >= len(values) or values[index] is None:
        return None
    arr = np.asarray(values[index])
    if arr.dtype.kind not in "iu":
        raise op.fail(node, f"input {index} must be an integer tensor, got {arr.dtype}")
    if arr.ndim > 1:
        raise op.fail(node, f"input {index} must be a 1-D tensor, got shape {list(arr.shape)}")
    return [int(v) for v in arr.reshape(-1)]


def has_input(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] != ""


def require_values(node: Node, what: str, found: object) -> None:
    """Raise HostOnly when a shape-defining input is not known when planning."""
    if found is None:
        raise HostOnly(f"{node.describe()}: {what} is not a constant, so the node runs on the host")


def kernel_dtype(node: Node, info: TensorInfo | None) -> None:
    """Raise HostOnly for element types kernels cannot hold (bfloat16, uint64)."""
    from spawnml.kernel.types import compute_type

    if info is not None and compute_type(info.dtype) is None:
        raise HostOnly(f"{node.describe()}: dtype {info.dtype} has no kernel element type, "
                       "so the node runs on the host")


def norm_axes(node: Node, axes: Sequence[int], rank: int) -> list[int]:
    """Normalise axes (negative allowed); duplicates are invalid."""
    out = [normalize_axis(node, int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        from spawnml.errors import InvalidModelError

        raise InvalidModelError(f"{node.describe()}: repeated axis in {list(axes)}")
    return out


def rank_of(op: OpDef, node: Node, info: TensorInfo | None, index: int = 0) -> int:
    if info is None:
        raise op.fail(node, f"input {index} is required")
    if info.shape is None:
        raise op.fail(node, f"input {index} needs a known rank")
    return len(info.shape)


def split3(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    """(outer, n, inner) of viewing ``shape`` as [prod(before axis), shape[axis], prod(after)]."""
    return prod(shape[:axis]), int(shape[axis]), prod(shape[axis + 1:])


def static(info: TensorInfo | None) -> tuple[int, ...]:
    assert info is not None
    return static_shape(info)


# ------------------------------------------------------------------------------- kernels


@helper
def row_base(out, n, inner):
    """Flat offset of element 0 of the row of this output element in an [outer, n, inner]
    view whose row axis has length ``n`` (the output has the same layout)."""
    return (out.flat // (n * inner)) * (n * inner) + out.flat % inner


@helper
def axis_pos(out, n, inner):
    """This output element's position along the row axis of an [outer, n, inner] view."""
    return (out.flat // inner) % n


@kernel
def fill(out: Output, value: float):
    """out = value (float constant converted to the output dtype)."""
    return cast(value, out.dtype)


@kernel
def fill_int(out: Output, value: int):
    """out = value (integer constant converted to the output dtype)."""
    return cast(value, out.dtype)


@kernel
def copy_index(x: Tensor, out: Output):
    """out = x, converting the element type."""
    return cast(x.flat[out.flat], out.dtype)
