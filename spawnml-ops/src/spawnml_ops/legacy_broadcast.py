"""Broadcasting before opset 7, normalised to numpy's.

Opsets 1-6 of Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal, Greater and Less broadcast only
with ``broadcast=1``, and then only B, to A's shape: B's dims line up with A's from
``axis`` (default: A's last dims, suffix matching), each equal to A's or 1, and a B of one
element is a scalar; with ``broadcast=0`` the shapes must be equal. PRelu 1-6 shares a
one-element slope and otherwise applies it per channel (axis 1). ``consumed_inputs``
(opset 1) is ignored.

Each rule becomes the shape B is *read as*: the same elements, at A's rank, after which
numpy's rules (opset 7 on) give the old result. Ops reshape B once (``reference``) or copy
it into a temporary of that shape (``lower``, which fusion folds into the consumer); the
kernels are the opset 7 ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from spawnml.op import In, Lowering, Node, OpCase, Tmp

from .common import copy

if TYPE_CHECKING:
    from spawnml.op import OpDef

LEGACY_UNTIL = 7
"""The first opset with numpy-style broadcasting."""

Shape = tuple[int | str | None, ...]


def is_legacy(node: Node) -> bool:
    """Whether the node's opset predates numpy-style broadcasting."""
    return 0 < node.opset < LEGACY_UNTIL


def _static_size(shape: Shape) -> int | None:
    if not all(isinstance(d, int) for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64))


def _conflicts(a: Sequence, b: Sequence) -> bool:
    """Whether two equal-length shapes have a pair of different static dims."""
    return any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a, b))


def broadcast_flag(op: OpDef, node: Node) -> bool:
    """The node's ``broadcast`` attribute (0 or 1, default 0) as a bool."""
    flag = op.attr(node, "broadcast", 0)
    if flag not in (0, 1):
        raise op.fail(node, f"attribute 'broadcast' must be 0 or 1, got {flag!r}")
    return bool(flag)


def require_same_shape(op: OpDef, node: Node, b: Shape, a: Shape, b_name: str,
                       a_name: str) -> None:
    """Without ``broadcast=1`` an opset 1-6 operand must have the shape it combines with."""
    if len(a) != len(b) or _conflicts(a, b):
        raise op.fail(node, f"{b_name} {tuple(b)} differs from {a_name} {tuple(a)} and "
                            "broadcast is 0 (before opset 7 only broadcast=1 broadcasts)")


def _legacy_axis(op: OpDef, node: Node, rank_a: int, rank_b: int) -> int:
    axis = op.attr(node, "axis", None)
    if axis is None:
        return rank_a - rank_b  # suffix matching
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise op.fail(node, f"attribute 'axis' must be an int, got {axis!r}")
    start = int(axis) + rank_a if axis < 0 else int(axis)
    if not 0 <= start <= rank_a - rank_b:
        raise op.fail(node, f"axis {axis} places B (rank {rank_b}) outside A (rank {rank_a})")
    return start


def legacy_operand_shape(op: OpDef, node: Node, a: Shape, b: Shape) -> Shape:
    """The shape (A's rank) that B of an opset 1-6 binary op is read as."""
    a, b = tuple(a), tuple(b)
    if not broadcast_flag(op, node):
        require_same_shape(op, node, b, a, "B", "A")
        return b
    if _static_size(b) == 1:
        return ()
    if len(b) > len(a):
        raise op.fail(node, f"B {b} has a higher rank than A {a} (broadcast=1)")
    start = _legacy_axis(op, node, len(a), len(b))
    window = a[start:start + len(b)]
    if any(isinstance(x, int) and isinstance(y, int) and y not in (x, 1)
           for x, y in zip(window, b)):
        raise op.fail(node, f"B {b} does not broadcast to A {a} from axis {start}")
    return (1,) * start + b + (1,) * (len(a) - start - len(b))


def channel_slope_shape(op: OpDef, node: Node, x: Shape, slope: Shape) -> Shape:
    """The shape PRelu 1-6's slope is read as: a scalar, per channel (axis 1), or as given
    where it already broadcasts to X."""
    x, slope = tuple(x), tuple(slope)
    if _static_size(slope) == 1:
        return ()
    if len(slope) == 1 and len(x) >= 2 and not _conflicts(slope, x[1:2]):
        return (slope[0],) + (1,) * (len(x) - 2)
    return slope


def read_as(low: Lowering, index: int, dtype, shape: Shape, actual: Shape) -> In | Tmp:
    """Input ``index`` as a buffer of ``shape``: itself, or a copy with that shape."""
    if tuple(shape) == tuple(actual):
        return In(index)
    tmp = low.temp(dtype, [int(d) for d in shape])  # type: ignore[arg-type]
    low.launch(copy, [In(index)], tmp)
    return tmp


def legacy_cases(make: Callable[[tuple[int, ...], int], np.ndarray],
                 **tol: float) -> list[OpCase]:
    """Opset 6 conformance cases of a binary op; ``make(shape, seed)`` draws an input."""
    a = make((2, 3, 4, 5), 40)
    cases = [
        ("legacy_axis", [a, make((3, 4), 41)], {"broadcast": 1, "axis": 1}),
        ("legacy_axis0_size1", [a, make((2, 1), 42)], {"broadcast": 1, "axis": 0}),
        ("legacy_suffix", [a, make((4, 5), 43)], {"broadcast": 1}),
        ("legacy_one_element", [a, make((1, 1), 44)], {"broadcast": 1}),
        ("legacy_same_shape", [a, make((2, 3, 4, 5), 45)], {}),
    ]
    return [OpCase(name, inputs, attrs, opset=LEGACY_UNTIL - 1, **tol)
            for name, inputs, attrs in cases]
