"""Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze (zero-copy aliases of their input)
and Shape, Size (values known from shapes: a constant copied to the output).

The data-movement family (``movement``) and its helper modules register with this family.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Data, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import copy_index, has_input, input_ints, norm_axes, prod, rank_of, require_values


class _AliasOp(OpDef):
    """An op whose output is its input's buffer under another shape."""

    def out_shape(self, node: Node, shape: Sequence, values) -> tuple | None:
        raise NotImplementedError

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank_of(self, node, x)
        assert x is not None
        return [TensorInfo(x.dtype, self.out_shape(node, x.shape, values))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        shape = self.out_shape(node, x.shape, inputs)
        return [x.reshape(shape).copy()]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        if not outputs[0].is_static:
            raise_unknown(node)
        return Lowering(aliases={0: 0})


def raise_unknown(node: Node) -> None:
    require_values(node, "a shape-defining input", None)


class Reshape(_AliasOp):
    op_type = "Reshape"
    value_inputs = (1,)

    def out_shape(self, node: Node, shape: Sequence, values) -> tuple | None:
        if node.opset < 5:
            target = list(self.attr(node, "shape", required=True))
        else:
            found = input_ints(self, node, values, 1)
            if found is None:
                return None
            target = found
        allowzero = int(self.attr(node, "allowzero", 0))
        if allowzero and 0 in target and -1 in target:
            raise self.fail(node, "allowzero=1 forbids 0 and -1 in the same shape")
        out: list = []
        for i, d in enumerate(target):
            if d == 0 and not allowzero:
                if i >= len(shape):
                    raise self.fail(node, f"shape[{i}] = 0 copies a dimension the input lacks")
                out.append(shape[i])
            elif d < -1:
                raise self.fail(node, f"invalid dimension {d} in shape {target}")
            else:
                out.append(d)
        if out.count(-1) > 1:
            raise self.fail(node, f"at most one -1 allowed in shape {target}")
        if not all(isinstance(d, int) for d in shape):
            return tuple(None if d == -1 else d for d in out)
        total = prod(shape)
        if -1 in out:
            known = prod(d for d in out if d != -1)
            if known == 0 or total % known:
                raise self.fail(node, f"cannot reshape {tuple(shape)} to {target}")
            out[out.index(-1)] = total // known
        if prod(out) != total:
            raise self.fail(node, f"cannot reshape {tuple(shape)} ({total} elements) to "
                                  f"{tuple(out)}")
        return tuple(out)

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return [
            OpCase("minus_one", [x, np.array([4, -1], np.int64)]),
            OpCase("zero_copies", [x, np.array([0, 0, 2, 2], np.int64)]),
            OpCase("allowzero_empty", [np.zeros((0, 3), np.float32), np.array([3, 0], np.int64)],
                   {"allowzero": 1}, opset=14),
            OpCase("to_scalar", [np.array([5.0], np.float32), np.zeros((0,), np.int64)]),
            OpCase("int64_data", [x.astype(np.int64), np.array([-1], np.int64)]),
        ]


class Flatten(_AliasOp):
    op_type = "Flatten"

    def out_shape(self, node: Node, shape: Sequence, values) -> tuple | None:
        rank = len(shape)
        axis = int(self.attr(node, "axis", 1))
        if not -rank <= axis <= rank:
            raise self.fail(node, f"axis {axis} is out of range for rank {rank}")
        axis = axis + rank if axis < 0 else axis
        if not all(isinstance(d, int) for d in shape):
            return (None, None)
        return (prod(shape[:axis]), prod(shape[axis:]))

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return [OpCase(f"axis{a}", [x], {"axis": a}) for a in (0, 1, 3, -1)] + [
            OpCase("size0", [np.zeros((2, 0, 3), np.float32)], {"axis": 2})]


def _squeeze_axes(op: OpDef, node: Node, values, rank: int) -> list[int] | None:
    """Axes from the attribute (<13) or input (>=13); [] when absent; None when unknown."""
    if node.opset >= 13:
        if not has_input(node, 1):
            return []
        found = input_ints(op, node, values, 1)
        return None if found is None else norm_axes(node, found, rank)
    return norm_axes(node, list(op.attr(node, "axes", [])), rank)


class Squeeze(_AliasOp):
    op_type = "Squeeze"
    value_inputs = (1,)

    def out_shape(self, node: Node, shape: Sequence, values) -> tuple | None:
        axes = _squeeze_axes(self, node, values, len(shape))
        if axes is None:
            return None
        if not axes:
            if not all(isinstance(d, int) for d in shape):
                return None
            return tuple(d for d in shape if d != 1)
        for a in axes:
            if isinstance(shape[a], int) and shape[a] != 1:
                raise self.fail(node, f"cannot squeeze axis {a} of size {shape[a]}")
        return tuple(d for i, d in enumerate(shape) if i not in axes)

    def cases(self) -> list[OpCase]:
        x = np.ones((1, 3, 1, 2), np.float32)
        return [
            OpCase("all", [x]),
            OpCase("neg_axes", [x, np.array([-2, 0], np.int64)]),
            OpCase("attr_form", [x], {"axes": [2]}, opset=11),
        ]


class Unsqueeze(_AliasOp):
    op_type = "Unsqueeze"
    value_inputs = (1,)

    def out_shape(self, node: Node, shape: Sequence, values) -> tuple | None:
        if node.opset >= 13:
            if not has_input(node, 1):
                raise self.fail(node, "input 1 (axes) is required")
            found = input_ints(self, node, values, 1)
            if found is None:
                return None
        else:
            found = list(self.attr(node, "axes", required=True))
        rank = len(shape) + len(found)
        axes = norm_axes(node, found, rank)
        out: list = []
        it = iter(shape)
        for i in range(rank):
            out.append(1 if i in axes else next(it))
        return tuple(out)

    def cases(self) -> list[OpCase]:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        return [
            OpCase("neg_unsorted", [x, np.array([-1, 0], np.int64)]),
            OpCase("scalar", [np.array(3.0, np.float32), np.array([0], np.int64)]),
            OpCase("attr_form", [x], {"axes": [1, 3]}, opset=11),
        ]


class _ShapeValueOp(OpDef):
    """An op whose output is a function of the input's shape only."""

    def value(self, node: Node, shape: Sequence[int]) -> np.ndarray:
        raise NotImplementedError

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        return [self.value(node, np.asarray(inputs[0]).shape)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        x = inputs[0]
        if not x.is_static:
            raise_unknown(node)
        low = Lowering()
        low.launch(copy_index, [Data(self.value(node, x.shape))], Out(0))
        return low


class Shape(_ShapeValueOp):
    op_type = "Shape"

    def _range(self, node: Node, rank: int) -> tuple[int, int]:
        start = int(self.attr(node, "start", 0))
        end = self.attr(node, "end", None)
        end = rank if end is None else int(end)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        return start, max(end, start)

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        rank = rank_of(self, node, inputs[0] if inputs else None)
        start, end = self._range(node, rank)
        return [TensorInfo(DType.int64, (end - start,))]

    def value(self, node: Node, shape: Sequence[int]) -> np.ndarray:
        start, end = self._range(node, len(shape))
        return np.array(list(shape)[start:end], np.int64)

    def cases(self) -> list[OpCase]:
        x = np.zeros((2, 3, 4), np.float32)
        return [OpCase("all", [x]), OpCase("start_end", [x], {"start": -2, "end": 10}, opset=15),
                OpCase("empty_range", [x], {"start": 2, "end": 1}, opset=15),
                OpCase("scalar", [np.array(1.0, np.float32)])]


class Size(_ShapeValueOp):
    op_type = "Size"

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        rank_of(self, node, inputs[0] if inputs else None)
        return [TensorInfo(DType.int64, ())]

    def value(self, node: Node, shape: Sequence[int]) -> np.ndarray:
        return np.array(prod(shape), np.int64)

    def cases(self) -> list[OpCase]:
        return [OpCase("3d", [np.zeros((2, 3, 4), np.float32)]),
                OpCase("size0", [np.zeros((2, 0), np.float32)])]


OPS: list[type[OpDef]] = [Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size]
