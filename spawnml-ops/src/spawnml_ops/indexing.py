"""Indexing ops: Gather, GatherElements, GatherND, ScatterND, ScatterElements.

Indices may be int32 or int64 and negative (counted from the end). An index outside its
axis raises InvalidInputError on every backend, as onnxruntime does: the host checks values
it knows (InvalidModelError for constant indices), and for the others the lowering adds a
``count_outside`` check that the runtime reads back with the outputs. The kernels themselves
wrap and clamp, so a bad index never reads outside a buffer. Scatters are written
gather-style: each output element scans the updates for the ones that land on it, applying
them in order (the last wins for reduction "none").
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, InvalidModelError, SpawnMLError
from spawnml.kernel import Output, Tensor, cast, helper, i32, kernel, static_range
from spawnml.op import Data, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import prod, rank_of, static
from .common import normalize_axis

REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


@helper
def wrap_index(v, n):
    i = cast(v, i32)
    return i + n if i < 0 else i


@kernel
def gather(data: Tensor, indices: Tensor, out: Output, axis: int):
    q = indices.ndim
    off = 0
    for d in static_range(axis):
        off = off + out.index[d] * data.strides[d]
    iflat = 0
    for d in static_range(q):
        iflat = iflat + out.index[axis + d] * indices.strides[d]
    off = off + wrap_index(indices.flat[iflat], data.shape[axis]) * data.strides[axis]
    for d in static_range(axis + 1, data.ndim):
        off = off + out.index[d + q - 1] * data.strides[d]
    return data.flat[off]


@kernel
def gather_elements(data: Tensor, indices: Tensor, out: Output, axis: int):
    off = 0
    for d in static_range(out.ndim):
        if d == axis:
            off = off + wrap_index(indices.flat[out.flat], data.shape[d]) * data.strides[d]
        else:
            off = off + out.index[d] * data.strides[d]
    return data.flat[off]


@kernel
def gather_nd(data: Tensor, indices: Tensor, out: Output, batch_dims: int):
    last = indices.shape[indices.ndim - 1]
    q = indices.ndim
    ibase = 0
    for d in static_range(q - 1):
        ibase = ibase + out.index[d] * indices.strides[d]
    off = 0
    for d in static_range(batch_dims):
        off = off + out.index[d] * data.strides[d]
    for j in static_range(last):
        k = batch_dims + j
        off = off + wrap_index(indices.flat[ibase + j], data.shape[k]) * data.strides[k]
    for d in static_range(batch_dims + last, data.ndim):
        off = off + out.index[q - 1 + d - batch_dims - last] * data.strides[d]
    return data.flat[off]


@helper
def apply_reduction(reduction, acc, v):
    if reduction == 1:
        return acc + v
    elif reduction == 2:
        return acc * v
    elif reduction == 3:
        return max(acc, v)
    elif reduction == 4:
        return min(acc, v)
    else:
        return v


@kernel
def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, out: Output, reduction: int):
    """Each output element scans every index tuple for its own position."""
    last = indices.shape[indices.ndim - 1]
    n_up = indices.size // last
    slice_size = updates.size // max(n_up, 1)
    acc = data.flat[out.flat]
    inner = out.flat % slice_size
    for u in range(n_up):
        hit = True
        for j in static_range(last):
            hit = hit and wrap_index(indices.flat[u * last + j], out.shape[j]) == out.index[j]
        if hit:
            acc = apply_reduction(reduction, acc, updates.flat[u * slice_size + inner])
    return acc


@kernel
def scatter_elements(data: Tensor, indices: Tensor, updates: Tensor, out: Output, axis: int,
                     reduction: int):
    """Only updates sharing this element's coordinates off ``axis`` can land on it."""
    acc = data.flat[out.flat]
    inside = True
    base = 0
    for d in static_range(out.ndim):
        if d != axis:
            inside = inside and out.index[d] < indices.shape[d]
            base = base + out.index[d] * indices.strides[d]
    if inside:
        for k in range(indices.shape[axis]):
            u = base + k * indices.strides[axis]
            if wrap_index(indices.flat[u], out.shape[axis]) == out.index[axis]:
                acc = apply_reduction(reduction, acc, updates.flat[u])
    return acc


CHECK_BLOCK = 4096
"""Indices one invocation of ``count_outside`` scans (webgl caps loops at 65535)."""


@kernel
def count_outside(indices: Tensor, bounds: Tensor, out: Output, block: int):
    """How many indices of block ``out.flat`` fall outside [-b, b): ``b`` is the bound of
    their position along the last axis, ``bounds`` repeating along the flat indices."""
    n = 0
    for k in range(block):
        i = out.flat * block + k
        if i < indices.size:
            b = bounds.flat[i % bounds.size]
            v = indices.flat[i]
            if v < -b or v >= b:
                n = n + 1
    return n


def count_outside_host(indices: np.ndarray, bounds: list[int]) -> int:
    """``count_outside`` over every block, on the host."""
    if not bounds or not indices.size:
        return 0
    b = np.asarray(bounds, np.int64)
    flat = np.asarray(indices).astype(np.int64).reshape(-1, b.size)
    return int(((flat < -b) | (flat >= b)).sum())


class _Indexed(OpDef):
    """An op reading positions from input 1 (indices) checked against ``bounds``."""

    def bounds(self, node: Node, data: tuple[int, ...], indices: tuple[int, ...]) -> list[int]:
        """The bound of each position along the indices' period (one bound: every index)."""
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(data))
        return [data[axis]]

    def _message(self, node: Node, bounds: list[int]) -> str:
        where = (f"[-{bounds[0]}, {bounds[0] - 1}]" if len(bounds) == 1 else
                 f"the data's dims {bounds} (negative values count from the end)")
        return f"{node.describe()}: {{count}} index value(s) fall outside {where}"

    def require_inside(self, node: Node, data: tuple[int, ...], indices: np.ndarray,
                       error: type[SpawnMLError] = InvalidInputError) -> None:
        bounds = self.bounds(node, data, indices.shape)
        count = count_outside_host(indices, bounds)
        if count:
            raise error(self._message(node, bounds).format(count=count))

    def add_checks(self, low: Lowering, node: Node, inputs, values) -> None:
        """Check known indices now (a model error); count the others on the device."""
        data, indices = tuple(static(inputs[0])), tuple(static(inputs[1]))
        known = values[1] if len(values) > 1 else None
        if known is not None:
            self.require_inside(node, data, np.asarray(known), InvalidModelError)
            return
        size = prod(indices)
        bounds = self.bounds(node, data, indices)
        if size and bounds:
            low.check(count_outside, [In(1), Data(np.array(bounds, inputs[1].dtype.numpy))],
                      -(-size // CHECK_BLOCK), self._message(node, bounds), block=CHECK_BLOCK)


def _check_indices(op: OpDef, node: Node, info: TensorInfo | None) -> TensorInfo:
    if info is None or info.shape is None:
        raise op.fail(node, "indices of known rank are required")
    if info.dtype not in (DType.int32, DType.int64):
        raise op.fail(node, f"indices must be int32 or int64, got {info.dtype}")
    return info


class Gather(_Indexed):
    op_type = "Gather"

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        rank = rank_of(self, node, x)
        idx = _check_indices(self, node, inputs[1] if len(inputs) > 1 else None)
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), rank)
        shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]  # type: ignore[operator, index]
        return [TensorInfo(x.dtype, shape)]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, idx = np.asarray(inputs[0]), np.asarray(inputs[1])
        self.require_inside(node, x.shape, idx)
        return [np.take(x, idx.astype(np.int64), axis=normalize_axis(
            node, int(self.attr(node, "axis", 0)), x.ndim))]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if outputs[0].size:
            axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(static(inputs[0])))
            self.add_checks(low, node, inputs, values)
            low.launch(gather, [In(0), In(1)], Out(0), axis=axis)
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return [
            OpCase("axis0", [x, np.array([1, 0, 1], np.int64)]),
            OpCase("neg_idx_axis_neg1", [x, np.array([[-1, 0], [2, -4]], np.int32)], {"axis": -1}),
            OpCase("scalar_idx", [x, np.array(2, np.int64)], {"axis": 1}),
            OpCase("empty_idx", [x, np.zeros((0,), np.int64)], {"axis": 1}),
            OpCase("int64_data", [x.astype(np.int64), np.array([0], np.int64)], {"axis": 2}),
            OpCase("past_end", [x, np.array([[0, 4]], np.int64)], {"axis": 1},
                   raises=InvalidInputError),
            OpCase("below_start_int32", [x, np.array([-1, -5], np.int32)], {"axis": -1},
                   raises=InvalidInputError),
        ]


class GatherElements(_Indexed):
    op_type = "GatherElements"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        rank = rank_of(self, node, x)
        idx = _check_indices(self, node, inputs[1] if len(inputs) > 1 else None)
        if len(idx.shape) != rank:  # type: ignore[arg-type]
            raise self.fail(node, "indices must have the rank of data")
        normalize_axis(node, int(self.attr(node, "axis", 0)), rank)
        return [TensorInfo(x.dtype, idx.shape)]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, idx = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), x.ndim)
        self.require_inside(node, x.shape, idx)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        return [np.take_along_axis(x, idx, axis=axis)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if outputs[0].size:
            axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(static(inputs[0])))
            self.add_checks(low, node, inputs, values)
            low.launch(gather_elements, [In(0), In(1)], Out(0), axis=axis)
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        return [OpCase("axis1_neg", [x, np.array([[0, -1], [3, 1], [2, 2]], np.int64)],
                       {"axis": 1}),
                OpCase("axis0_int32", [x, np.array([[2, 0, 1, 0]], np.int32)], {"axis": -2}),
                OpCase("past_end", [x, np.array([[0, 4], [1, 1], [2, 2]], np.int64)],
                       {"axis": 1}, raises=InvalidInputError)]


class GatherND(_Indexed):
    op_type = "GatherND"
    since_version = 11

    def bounds(self, node: Node, data: tuple[int, ...], indices: tuple[int, ...]) -> list[int]:
        b = int(self.attr(node, "batch_dims", 0))
        return list(data[b:b + indices[-1]])

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        rank = rank_of(self, node, x)
        idx = _check_indices(self, node, inputs[1] if len(inputs) > 1 else None)
        if idx.dtype is not DType.int64:
            raise self.fail(node, "indices must be int64")
        b = int(self.attr(node, "batch_dims", 0))
        q = len(idx.shape)  # type: ignore[arg-type]
        last = idx.shape[-1]  # type: ignore[index]
        if not isinstance(last, int) or q < 1 or not 0 <= b < min(q, rank) or b + last > rank:
            raise self.fail(node, f"batch_dims={b} and indices {idx.shape} do not fit data "
                                  f"{x.shape}")
        shape = tuple(idx.shape[:-1]) + tuple(x.shape[b + last:])  # type: ignore[index, operator]
        return [TensorInfo(x.dtype, shape)]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, idx = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
        b = int(self.attr(node, "batch_dims", 0))
        self.require_inside(node, x.shape, idx)
        last = idx.shape[-1]
        bshape = x.shape[:b]
        xb = x.reshape((prod(bshape), *x.shape[b:]))
        ib = idx.reshape((prod(bshape), -1, last))
        outs = []
        for i in range(xb.shape[0]):
            coords = ib[i] % np.array(xb.shape[1:1 + last], np.int64)
            outs.append(xb[i][tuple(coords.T)])
        y = np.stack(outs) if outs else np.zeros((0, *x.shape[b + last:]), x.dtype)
        return [y.reshape(idx.shape[:-1] + x.shape[b + last:])]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if outputs[0].size:
            self.add_checks(low, node, inputs, values)
            low.launch(gather_nd, [In(0), In(1)], Out(0),
                       batch_dims=int(self.attr(node, "batch_dims", 0)))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return [OpCase("full_index", [x, np.array([[0, 2, 3], [1, -1, 0]], np.int64)]),
                OpCase("slices", [x, np.array([[1], [0]], np.int64)]),
                OpCase("batch_dims1", [x, np.array([[[2, 1]], [[0, 3]]], np.int64)],
                       {"batch_dims": 1}),
                OpCase("past_end_second_dim", [x, np.array([[0, 2, 3], [1, 3, 0]], np.int64)],
                       raises=InvalidInputError),
                OpCase("batch_dims1_below_start", [x, np.array([[[-4, 1]], [[0, 3]]], np.int64)],
                       {"batch_dims": 1}, raises=InvalidInputError)]


def _reduction(op: OpDef, node: Node) -> int:
    r = op.attr(node, "reduction", "none")
    r = r.decode() if isinstance(r, bytes) else str(r)
    allowed = {"none"} if node.opset < 16 else ({"none", "add", "mul"} if node.opset < 18
                                                 else set(REDUCTIONS))
    if r not in allowed:
        raise op.fail(node, f"reduction {r!r} is not supported at opset {node.opset}")
    return REDUCTIONS[r]


def _np_reduce(code: int, a, b):
    return [None, np.add, np.multiply, np.maximum, np.minimum][code](a, b) if code else b


class ScatterND(_Indexed):
    op_type = "ScatterND"
    since_version = 11

    def bounds(self, node: Node, data: tuple[int, ...], indices: tuple[int, ...]) -> list[int]:
        return list(data[:indices[-1]])

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        rank = rank_of(self, node, x)
        idx = _check_indices(self, node, inputs[1] if len(inputs) > 1 else None)
        if len(inputs) < 3 or inputs[2] is None or inputs[2].dtype != x.dtype:
            raise self.fail(node, "updates of the data's dtype are required")
        last = idx.shape[-1]  # type: ignore[index]
        if isinstance(last, int) and last > rank:
            raise self.fail(node, f"index tuples of length {last} exceed data rank {rank}")
        _reduction(self, node)
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, idx, upd = (np.asarray(a) for a in inputs[:3])
        code = _reduction(self, node)
        self.require_inside(node, x.shape, idx)
        y = x.copy()
        last = idx.shape[-1]
        for u, tup in enumerate(idx.reshape(-1, last)):
            pos = tuple(int(t) for t in tup)
            y[pos] = _np_reduce(code, y[pos], upd.reshape((-1, *x.shape[last:]))[u])
        return [y]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if outputs[0].size:
            self.add_checks(low, node, inputs, values)
            low.launch(scatter_nd, [In(0), In(1), In(2)], Out(0),
                       reduction=_reduction(self, node))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        idx = np.array([[1], [-1], [1]], np.int64)
        upd = np.arange(18, dtype=np.float32).reshape(3, 6) + 100
        cases = [OpCase(f"rows_{r}", [x, idx, upd], {"reduction": r}, opset=18)
                 for r in REDUCTIONS]
        return [
            *cases,
            OpCase(
                "elements",
                [x, np.array([[0, 5], [3, 0]], np.int64), np.array([-1.0, -2.0], np.float32)],
            ),
            OpCase("past_end", [x, np.array([[0, 6]], np.int64), np.array([1.0], np.float32)],
                   raises=InvalidInputError),
        ]


class ScatterElements(_Indexed):
    op_type = "ScatterElements"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        rank = rank_of(self, node, x)
        idx = _check_indices(self, node, inputs[1] if len(inputs) > 1 else None)
        if len(inputs) < 3 or inputs[2] is None or inputs[2].shape != idx.shape:
            raise self.fail(node, "updates must have the shape of indices")
        if len(idx.shape) != rank:  # type: ignore[arg-type]
            raise self.fail(node, "indices must have the rank of data")
        normalize_axis(node, int(self.attr(node, "axis", 0)), rank)
        _reduction(self, node)
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, idx, upd = (np.asarray(a) for a in inputs[:3])
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), x.ndim)
        code = _reduction(self, node)
        self.require_inside(node, x.shape, idx)
        y = x.copy()
        for pos in np.ndindex(*idx.shape):
            target = list(pos)
            target[axis] = int(idx[pos]) % x.shape[axis]
            y[tuple(target)] = _np_reduce(code, y[tuple(target)], upd[pos])
        return [y]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if outputs[0].size:
            axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(static(inputs[0])))
            self.add_checks(low, node, inputs, values)
            low.launch(scatter_elements, [In(0), In(1), In(2)], Out(0), axis=axis,
                       reduction=_reduction(self, node))
        return low

    def cases(self) -> list[OpCase]:
        x = np.zeros((3, 3), np.float32) + 1
        idx = np.array([[1, 0, 2], [0, 2, 1], [1, 1, 1]], np.int64)
        upd = np.arange(9, dtype=np.float32).reshape(3, 3) + 2
        cases = [OpCase(f"axis0_{r}", [x, idx, upd], {"reduction": r}, opset=18)
                 for r in REDUCTIONS]
        return [
            *cases,
            OpCase(
                "axis1_neg_int32",
                [x, np.array([[-1], [0]], np.int32), np.array([[5.0], [6.0]], np.float32)],
                {"axis": -1},
            ),
            OpCase("below_start", [x, np.array([[-4], [0]], np.int64),
                                   np.array([[5.0], [6.0]], np.float32)], {"axis": 1},
                   raises=InvalidInputError),
        ]


class Scatter(ScatterElements):
    """The deprecated name of ScatterElements (opsets 9-10)."""

    op_type = "Scatter"
    since_version = 9
    until_version = 11

    def cases(self) -> list[OpCase]:
        x = np.zeros((3, 3), np.float32)
        idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
        upd = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
        return [OpCase("axis0", [x, idx, upd], opset=10),
                OpCase("axis1_int32", [x, idx.astype(np.int32), upd], {"axis": 1}, opset=9),
                OpCase("past_end", [x, idx + 1, upd], opset=10, raises=InvalidInputError)]


OPS: list[type[OpDef]] = [Gather, GatherElements, GatherND, ScatterND, ScatterElements, Scatter]
