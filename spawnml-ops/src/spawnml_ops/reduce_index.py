"""Index reductions and scans along one axis: ArgMax, ArgMin, CumSum and TopK.

All view the input as [outer, n, inner] around the axis (``axes.split3``).
"""

# ruff: noqa: F821  (kernel intrinsics are resolved by the kernel front end)
from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, i32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import (
    axis_pos,
    input_ints,
    kernel_dtype,
    rank_of,
    require_values,
    row_base,
    split3,
    static,
)
from .common import normalize_axis

NUMERIC = (DType.float32, DType.float16, DType.float64, DType.int32, DType.int64,
           DType.uint32, DType.uint8, DType.int8, DType.int16, DType.uint16)


@kernel
def arg_extreme(x: Tensor, out: Output, n: int, inner: int, largest: bool, last: bool,
                isfloat: bool):
    """Index of the first (or last) max/min along the row; NaN counts as the extreme."""
    base = (out.flat // inner) * (n * inner) + out.flat % inner
    best = x.flat[base]
    best_k = 0
    for k in range(1, n):
        v = x.flat[base + k * inner]
        if largest:
            better = v >= best if last else v > best
        else:
            better = v <= best if last else v < best
        if isfloat:
            # numpy: the first NaN wins (the last one with select_last_index)
            better = (better and not isnan(best)) or (isnan(v) and (last or not isnan(best)))
        if better:
            best = v
            best_k = k
    return cast(best_k, out.dtype)


class _ArgOp(OpDef):
    largest: bool

    def _axis(self, node: Node, rank: int) -> int:
        return normalize_axis(node, int(self.attr(node, "axis", 0)), rank)

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None and x.shape is not None
        if x.dtype not in NUMERIC:
            raise self.fail(node, f"dtype {x.dtype} is not supported")
        axis = self._axis(node, rank)
        if x.shape[axis] == 0:
            raise self.fail(node, "cannot take the arg max/min of an empty axis")
        keep = int(self.attr(node, "keepdims", 1))
        shape = list(x.shape)
        if keep:
            shape[axis] = 1
        else:
            del shape[axis]
        return [TensorInfo(DType.int64, tuple(shape))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = self._axis(node, x.ndim)
        fn = np.argmax if self.largest else np.argmin
        if int(self.attr(node, "select_last_index", 0)):
            flipped = np.flip(x, axis)
            y = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            y = fn(x, axis=axis)
        if int(self.attr(node, "keepdims", 1)):
            y = np.expand_dims(y, axis)
        return [np.asarray(y, np.int64)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        _, n, inner = split3(shape, self._axis(node, len(shape)))
        low = Lowering()
        low.launch(arg_extreme, [In(0)], Out(0), n=n, inner=inner, largest=self.largest,
                   last=bool(self.attr(node, "select_last_index", 0)),
                   isfloat=inputs[0].dtype.is_float)
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 3.0, 3.0, -1.0], [np.nan, 2.0, np.nan, 0.0], [-np.inf, -np.inf, 5, 5]],
                     np.float32)
        ints = np.array([[4, 1, 4], [0, 0, -2]], np.int64)
        return [
            OpCase("axis1_ties", [x], {"axis": 1}),
            OpCase("last_index", [x], {"axis": 1, "select_last_index": 1}),
            OpCase("neg_axis_nokeep", [x], {"axis": -2, "keepdims": 0}),
            OpCase("int64", [ints], {"axis": 1, "select_last_index": 1}),
            OpCase("size1_axis", [x[:, :1]], {"axis": 1}),
            OpCase("size0_other_axis", [np.zeros((0, 3), np.float32)], {"axis": 1}),
        ]


class ArgMax(_ArgOp):
    op_type = "ArgMax"
    largest = True


class ArgMin(_ArgOp):
    op_type = "ArgMin"
    largest = False


@kernel
def cumsum(x: Tensor, out: Output, n: int, inner: int, exclusive: bool, reverse: bool):
    base = row_base(out, n, inner)
    pos = axis_pos(out, n, inner)
    acc = cast(0, out.dtype)  # not x * 0: that is NaN where x is ±inf
    if reverse:
        for k in range(pos + 1 if exclusive else pos, n):
            acc += x.flat[base + k * inner]
    else:
        for k in range(0, pos if exclusive else pos + 1):
            acc += x.flat[base + k * inner]
    return acc


class CumSum(OpDef):
    op_type = "CumSum"
    since_version = 11
    value_inputs = (1,)

    def _axis(self, node: Node, rank: int, values) -> int | None:
        found = input_ints(self, node, values, 1)
        if found is None:
            return None
        if len(found) != 1:
            raise self.fail(node, f"axis must be a scalar, got {len(found)} values")
        return normalize_axis(node, found[0], rank)

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None
        if x.dtype not in NUMERIC:
            raise self.fail(node, f"dtype {x.dtype} is not supported")
        if len(inputs) < 2 or inputs[1] is None:
            raise self.fail(node, "input 1 (axis) is required")
        self._axis(node, rank, values)
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = self._axis(node, x.ndim, inputs)
        assert axis is not None
        v = np.flip(x, axis) if int(self.attr(node, "reverse", 0)) else x
        if int(self.attr(node, "exclusive", 0)) and v.shape[axis]:
            # shift by one, starting at 0 (not cumsum - v: inf - inf is NaN)
            zeros = np.zeros_like(np.take(v, [0], axis=axis))
            v = np.concatenate([zeros, np.take(v, np.arange(v.shape[axis] - 1), axis=axis)],
                               axis=axis)
        y = np.cumsum(v, axis=axis, dtype=x.dtype)
        if int(self.attr(node, "reverse", 0)):
            y = np.flip(y, axis)
        return [y.astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        axis = self._axis(node, len(shape), values)
        require_values(node, "the axis input", axis)
        assert axis is not None
        _, n, inner = split3(shape, axis)
        low = Lowering()
        low.launch(cumsum, [In(0)], Out(0), n=n, inner=inner,
                   exclusive=bool(self.attr(node, "exclusive", 0)),
                   reverse=bool(self.attr(node, "reverse", 0)))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
        ax = np.array(1, np.int64)
        return [
            OpCase("axis1", [x, ax]),
            OpCase("neg_axis_int32", [x, np.array(-2, np.int32)]),
            OpCase("exclusive", [x, ax], {"exclusive": 1}),
            OpCase("reverse", [x, ax], {"reverse": 1}),
            OpCase("exclusive_reverse", [x, ax], {"exclusive": 1, "reverse": 1}),
            OpCase("int64", [x.astype(np.int64), ax], {"reverse": 1}),
            OpCase("size0", [np.zeros((0, 3), np.float32), ax]),
            OpCase("inf", [np.array([1.0, np.inf, -np.inf, 2.0], np.float32),
                           np.array(0, np.int64)]),
        ]


@kernel
def topk_rank(x: Tensor, out: Output, n: int, inner: int, largest: bool, isfloat: bool):
    """Rank of each element in its row (0 = first in TopK order; ties: lower index first).
    NaN is larger than every number (first for largest, last for smallest, as onnxruntime
    and numpy's sort order)."""
    base = row_base(out, n, inner)
    i = axis_pos(out, n, inner)
    v = x.flat[out.flat]
    r = 0
    for m in range(n):
        w = x.flat[base + m * inner]
        if largest:
            before = w > v or (w == v and m < i)
        else:
            before = w < v or (w == v and m < i)
        if isfloat:
            if isnan(w) and isnan(v):
                before = m < i
            elif isnan(w) or isnan(v):  # one NaN: first when largest, last when smallest
                before = isnan(w) if largest else isnan(v)
        r += 1 if before else 0
    return r


@kernel
def topk_index(rank: Tensor, out: Output, n: int, k: int, inner: int):
    """The index of the element whose rank is this output position."""
    j = axis_pos(out, k, inner)
    base = (out.flat // (k * inner)) * (n * inner) + out.flat % inner
    found = 0
    for m in range(n):
        if rank.flat[base + m * inner] == j:
            found = m
    return cast(found, out.dtype)


@kernel
def take_along(x: Tensor, idx: Tensor, out: Output, n: int, k: int, inner: int):
    base = (out.flat // (k * inner)) * (n * inner) + out.flat % inner
    return x.flat[base + cast(idx.flat[out.flat], i32) * inner]


class TopK(OpDef):
    op_type = "TopK"
    value_inputs = (1,)

    def _k(self, node: Node, values) -> int | None:
        if node.opset < 10:
            return int(self.attr(node, "k", required=True))
        found = input_ints(self, node, values, 1)
        if found is None:
            return None
        if len(found) != 1:
            raise self.fail(node, f"K must hold one value, got {len(found)}")
        return found[0]

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None and x.shape is not None
        if x.dtype not in NUMERIC and x.dtype is not DType.uint64:
            raise self.fail(node, f"dtype {x.dtype} is not supported")
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), rank)
        k = self._k(node, values)
        if k is not None:
            if k < 0 or (isinstance(x.shape[axis], int) and k > x.shape[axis]):
                raise self.fail(node, f"K={k} is out of range for axis size {x.shape[axis]}")
        shape = list(x.shape)
        shape[axis] = k
        return [TensorInfo(x.dtype, tuple(shape)), TensorInfo(DType.int64, tuple(shape))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), x.ndim)
        k = self._k(node, inputs)
        assert k is not None
        largest = int(self.attr(node, "largest", 1))
        # stable sort on the negated keys keeps lower indices first among ties
        keys = -x.astype(np.float64) if largest else x
        idx = np.argsort(keys, axis=axis, kind="stable")  # NaN last
        if largest and x.dtype.kind == "f":  # NaN is the largest value: first, in index order
            nan_first = ~np.isnan(np.take_along_axis(x, idx, axis=axis))
            idx = np.take_along_axis(idx, np.argsort(nan_first, axis=axis, kind="stable"), axis)
        idx = np.take(idx, np.arange(k), axis=axis)
        return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), len(shape))
        k = self._k(node, values)
        require_values(node, "the K input", k)
        kernel_dtype(node, inputs[0])
        assert k is not None
        _, n, inner = split3(shape, axis)
        low = Lowering()
        rank = low.temp(DType.int32, shape)
        low.launch(topk_rank, [In(0)], rank, n=n, inner=inner,
                   largest=bool(self.attr(node, "largest", 1)), isfloat=inputs[0].dtype.is_float)
        low.launch(topk_index, [rank], Out(1), n=n, k=k, inner=inner)
        low.launch(take_along, [In(0), Out(1)], Out(0), n=n, k=k, inner=inner)
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[3.0, 1.0, 3.0, 7.0, -2.0], [0.0, 0.0, 0.0, 1.0, -np.inf]], np.float32)
        k2 = np.array([2], np.int64)
        nan = np.array([[1.0, np.nan, 3.0, np.inf], [np.nan, -1.0, np.nan, 5.0]], np.float32)
        return [
            OpCase("largest_ties", [x, k2], opset=11, n_outputs=2),
            OpCase("smallest", [x, np.array([3], np.int64)], {"largest": 0}, opset=11,
                   n_outputs=2),
            OpCase("axis0", [x, np.array([1], np.int64)], {"axis": 0}, opset=11, n_outputs=2),
            OpCase("k0", [x, np.array([0], np.int64)], opset=11, n_outputs=2),
            OpCase("k_all_int32", [np.nan_to_num(x, neginf=-9).astype(np.int32),
                                   np.array([5], np.int64)], opset=11,
                   n_outputs=2),
            OpCase("opset1_attr", [x], {"k": 2}, opset=1, n_outputs=2),
            # NaN is the largest value (onnxruntime): first when largest, last when smallest
            OpCase("nan_largest", [nan, np.array([3], np.int64)], opset=11, n_outputs=2),
            OpCase("nan_smallest", [nan, np.array([3], np.int64)], {"largest": 0}, opset=11,
                   n_outputs=2),
        ]


OPS: list[type[OpDef]] = [ArgMax, ArgMin, CumSum, TopK]
