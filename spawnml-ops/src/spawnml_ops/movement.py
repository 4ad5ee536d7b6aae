"""Data movement: Transpose, Concat, Split, Slice, Expand, Tile; the layout ops (Pad,
DepthToSpace, ...) from ``layout`` and the indexing ops (Gather*, Scatter*) from
``indexing`` register with this family."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import has_input, input_ints, norm_axes, prod, rank_of, require_values, split3, static
from .common import broadcast_shapes, normalize_axis, same_dtype
from .indexing import OPS as INDEXING_OPS
from .layout import OPS as LAYOUT_OPS
from .views import CONCAT_KERNELS, broadcast_copy, launch_view, row_major_strides, tile


def _first(op: OpDef, node: Node, inputs) -> TensorInfo:
    x = inputs[0] if inputs else None
    rank_of(op, node, x)
    assert x is not None
    return x


class Transpose(OpDef):
    op_type = "Transpose"

    def _perm(self, node: Node, rank: int) -> list[int]:
        perm = self.attr(node, "perm", None)
        if perm is None:
            return list(range(rank))[::-1]
        perm = [int(p) for p in perm]
        if sorted(normalize_axis(node, p, rank) for p in perm) != list(range(rank)):
            raise self.fail(node, f"perm {perm} is not a permutation of {rank} axes")
        return [normalize_axis(node, p, rank) for p in perm]

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = _first(self, node, inputs)
        assert x.shape is not None
        perm = self._perm(node, len(x.shape))
        return [TensorInfo(x.dtype, tuple(x.shape[p] for p in perm))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [np.transpose(x, self._perm(node, x.ndim)).copy()]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        perm = self._perm(node, len(shape))
        strides = row_major_strides(shape)
        low = Lowering()
        launch_view(low, In(0), Out(0), 0, [shape[p] for p in perm], [strides[p] for p in perm])
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return [OpCase("default", [x]), OpCase("perm", [x], {"perm": [1, 0, 2]}),
                OpCase("int64", [x.astype(np.int64)], {"perm": [2, 0, 1]}),
                OpCase("size0", [np.zeros((0, 3), np.float32)]),
                OpCase("scalar", [np.array(2.0, np.float32)])]


class Concat(OpDef):
    op_type = "Concat"

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        if not inputs or any(i is None or i.shape is None for i in inputs):
            raise self.fail(node, "needs at least one input, all of known rank")
        dt = same_dtype(node, inputs)
        rank = len(inputs[0].shape)  # type: ignore[union-attr, arg-type]
        if node.opset < 4 and "axis" not in node.attrs:
            axis = 1
        else:
            axis = normalize_axis(node, int(self.attr(node, "axis", required=True)), rank)
        out = list(inputs[0].shape)  # type: ignore[union-attr, arg-type]
        total: int | None = 0
        for i in inputs:
            s = i.shape  # type: ignore[union-attr]
            if len(s) != rank:  # type: ignore[arg-type]
                raise self.fail(node, "inputs must share one rank")
            for d in range(rank):
                if d != axis and isinstance(s[d], int) and isinstance(out[d], int) \
                        and s[d] != out[d]:  # type: ignore[index]
                    raise self.fail(node, f"input shapes {[i.shape for i in inputs]} differ "
                                          f"outside axis {axis}")
            total = total + s[axis] if isinstance(total, int) and isinstance(s[axis], int) \
                else None  # type: ignore[index, operator]
        out[axis] = total
        return [TensorInfo(dt, tuple(out))]

    def _axis(self, node: Node, rank: int) -> int:
        return normalize_axis(node, int(self.attr(node, "axis", 1)), rank)

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in inputs]
        return [np.concatenate(arrays, axis=self._axis(node, arrays[0].ndim))]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        out_shape = static(outputs[0])
        axis = self._axis(node, len(out_shape))
        _, _, inner = split3(out_shape, axis)
        parts = [(In(i), static(t)[axis]) for i, t in enumerate(inputs) if prod(static(t))]
        low = Lowering()
        if not parts:
            return low
        if len(parts) == 1:
            launch_view(low, parts[0][0], Out(0), 0, out_shape, row_major_strides(out_shape))
            return low
        # up to four inputs per launch; longer lists are folded through temporaries
        acc, acc_n = parts[0]
        rest = parts[1:]
        while rest:
            group, rest = rest[:3], rest[3:]
            ns = (acc_n, *(n for _, n in group))
            shape = list(out_shape)
            shape[axis] = sum(ns)
            target = Out(0) if not rest else low.temp(outputs[0].dtype, shape)
            low.launch(CONCAT_KERNELS[len(ns)], [acc, *(r for r, _ in group)], target,
                       ns=ns, inner=inner)
            acc, acc_n = target, sum(ns)
        return low

    def cases(self) -> list[OpCase]:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        many = [a + i for i in range(6)]
        return [
            OpCase("axis0", [a, a + 10], {"axis": 0}),
            OpCase("neg_axis_three", [a, a[:, :1], a], {"axis": -1}),
            OpCase("six_inputs", many, {"axis": 1}),
            OpCase("with_empty", [a, np.zeros((2, 0), np.float32), a], {"axis": 1}),
            OpCase("single", [a], {"axis": 0}),
            OpCase("int64", [a.astype(np.int64), a.astype(np.int64)], {"axis": 1}),
        ]


class Split(OpDef):
    op_type = "Split"
    value_inputs = (1,)

    def _sizes(self, node: Node, shape: Sequence, values, n_out: int) -> list[int] | None:
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(shape))
        dim = shape[axis]
        if node.opset >= 13 and has_input(node, 1):
            sizes = input_ints(self, node, values, 1)
            if sizes is None:
                return None
        elif node.opset < 13 and ("split" in node.attrs or (node.opset < 2 and
                                                            has_input(node, 1))):
            sizes = list(self.attr(node, "split", None) or input_ints(self, node, values, 1)
                         or [])
        else:
            if not isinstance(dim, int):
                return None
            num = int(self.attr(node, "num_outputs", n_out)) if node.opset >= 18 else n_out
            if node.opset >= 18 and "num_outputs" not in node.attrs:
                raise self.fail(node, "needs the 'split' input or the num_outputs attribute")
            if num != n_out:
                raise self.fail(node, f"num_outputs={num} but the node has {n_out} outputs")
            chunk = -(-dim // num)
            sizes = [min(chunk, max(dim - chunk * i, 0)) for i in range(num)]
            if node.opset < 18 and dim % num:
                raise self.fail(node, f"axis size {dim} is not divisible into {num} outputs")
        if len(sizes) != n_out or any(s < 0 for s in sizes):
            raise self.fail(node, f"split sizes {sizes} do not match {n_out} outputs")
        if isinstance(dim, int) and sum(sizes) != dim:
            raise self.fail(node, f"split sizes {sizes} do not sum to axis size {dim}")
        return sizes

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = _first(self, node, inputs)
        assert x.shape is not None
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(x.shape))
        sizes = self._sizes(node, x.shape, values, len(node.outputs))
        outs = []
        for i in range(len(node.outputs)):
            s = list(x.shape)
            s[axis] = None if sizes is None else sizes[i]
            outs.append(TensorInfo(x.dtype, tuple(s)))
        return outs

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), x.ndim)
        sizes = self._sizes(node, x.shape, inputs, len(node.outputs))
        assert sizes is not None
        return [a.copy() for a in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        axis = normalize_axis(node, int(self.attr(node, "axis", 0)), len(shape))
        sizes = self._sizes(node, shape, values, len(node.outputs))
        require_values(node, "the split input", sizes)
        assert sizes is not None
        strides = row_major_strides(shape)
        low = Lowering()
        start = 0
        for i, n in enumerate(sizes):
            out_shape = list(shape)
            out_shape[axis] = n
            if prod(out_shape):  # one launch per output
                launch_view(low, In(0), Out(i), start * strides[axis], out_shape, strides)
            start += n
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        return [
            OpCase("equal_attr_form", [x], {"axis": 1}, opset=11, n_outputs=3),
            OpCase("sizes_input", [x, np.array([1, 5], np.int64)], {"axis": -1}, n_outputs=2),
            OpCase("num_outputs_uneven", [x], {"axis": 0, "num_outputs": 3}, opset=18,
                   n_outputs=3),
            OpCase("zero_size_part", [x, np.array([4, 0], np.int64)], {"axis": 0}, n_outputs=2),
        ]


class Slice(OpDef):
    op_type = "Slice"
    value_inputs = (1, 2, 3, 4)

    def _params(self, node: Node, shape: Sequence[int], values):
        """(starts, steps, out_shape) per axis after clamping; None when inputs are unknown."""
        rank = len(shape)
        if node.opset < 10:
            starts = list(self.attr(node, "starts", required=True))
            ends = list(self.attr(node, "ends", required=True))
            axes = self.attr(node, "axes", None)
            steps = None
        else:
            starts = input_ints(self, node, values, 1)
            ends = input_ints(self, node, values, 2)
            axes = input_ints(self, node, values, 3) if has_input(node, 3) else None
            steps = input_ints(self, node, values, 4) if has_input(node, 4) else None
            if starts is None or ends is None or (has_input(node, 3) and axes is None) or \
                    (has_input(node, 4) and steps is None):
                return None
        axes = list(range(len(starts))) if axes is None else norm_axes(node, axes, rank)
        steps = [1] * len(starts) if steps is None else steps
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise self.fail(node, "starts, ends, axes and steps must have the same length")
        st = [0] * rank
        sp = [1] * rank
        out = list(shape)
        for s, e, a, k in zip(starts, ends, axes, steps):
            if k == 0:
                raise self.fail(node, "slice step cannot be 0")
            dim = int(shape[a])
            s = s + dim if s < 0 else s
            e = e + dim if e < 0 else e
            if k > 0:
                s, e = min(max(s, 0), dim), min(max(e, 0), dim)
                n = max(0, -(-(e - s) // k))
            else:
                s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
                n = max(0, -(-(s - e) // -k))
            st[a], sp[a], out[a] = s, k, n
        return st, sp, out

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = _first(self, node, inputs)
        assert x.shape is not None
        if not x.is_static:
            return [TensorInfo(x.dtype, tuple([None] * len(x.shape)))]
        params = self._params(node, x.shape, values)  # type: ignore[arg-type]
        if params is None:
            return [TensorInfo(x.dtype, tuple([None] * len(x.shape)))]
        return [TensorInfo(x.dtype, tuple(params[2]))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        params = self._params(node, x.shape, inputs)
        assert params is not None
        st, sp, out = params
        y = x[tuple(slice(s, None, k) for s, k in zip(st, sp))]
        return [y[tuple(slice(0, n) for n in out)].copy()]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        params = self._params(node, shape, values)
        require_values(node, "starts/ends/axes/steps", params)
        assert params is not None
        st, sp, out = params
        strides = row_major_strides(shape)
        low = Lowering()
        if prod(out):
            launch_view(low, In(0), Out(0), sum(s * t for s, t in zip(st, strides)), out,
                        [k * t for k, t in zip(sp, strides)])
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

        def ints(*v: int) -> np.ndarray:
            return np.array(v, np.int64)

        return [
            OpCase("basic", [x, ints(0, 1), ints(2, 3), ints(0, 1)]),
            OpCase("neg_steps", [x, ints(-1, 4), ints(-100, 0), ints(0, 2), ints(-1, -2)]),
            OpCase("steps2_clamp", [x, ints(1), ints(1000), ints(-1), ints(2)]),
            OpCase("neg_axes_int32", [x, np.array([-3], np.int32), np.array([-1], np.int32),
                                      np.array([-2], np.int32)]),
            OpCase("empty_result", [x, ints(3), ints(1), ints(1)]),
            OpCase("default_axes", [x, ints(1, 0), ints(3, 4)]),
            OpCase("attr_form", [x], {"starts": [0, 1], "ends": [2, -1], "axes": [2, 0]},
                   opset=9),
        ]


class Expand(OpDef):
    op_type = "Expand"
    since_version = 8
    value_inputs = (1,)

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = _first(self, node, inputs)
        target = input_ints(self, node, values, 1)
        if target is None:
            n = inputs[1].shape[0] if inputs[1] is not None and inputs[1].shape else None
            return [TensorInfo(x.dtype, None if not isinstance(n, int) else
                               tuple([None] * max(n, len(x.shape))))]  # type: ignore[arg-type]
        return [TensorInfo(x.dtype, broadcast_shapes(node, x.shape, tuple(target)))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        shape = np.broadcast_shapes(x.shape, tuple(int(v) for v in np.asarray(inputs[1])))
        return [np.broadcast_to(x, shape).copy()]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        require_values(node, "the shape input", input_ints(self, node, values, 1))
        low = Lowering()
        low.launch(broadcast_copy, [In(0)], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(3, dtype=np.float32).reshape(3, 1)
        return [
            OpCase("broadcast", [x, np.array([2, 3, 4], np.int64)]),
            OpCase("ones_in_shape", [x, np.array([1, 1], np.int64)]),
            OpCase("smaller_rank_shape", [np.ones((2, 1, 4), np.float32), np.array([3, 1])]),
            OpCase("to_size0", [x, np.array([3, 0], np.int64)]),
            OpCase("bool", [np.array([True, False]), np.array([2, 2], np.int64)]),
        ]


class Tile(OpDef):
    op_type = "Tile"
    since_version = 6
    value_inputs = (1,)

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = _first(self, node, inputs)
        assert x.shape is not None
        reps = input_ints(self, node, values, 1)
        if reps is None:
            return [TensorInfo(x.dtype, tuple([None] * len(x.shape)))]
        if len(reps) != len(x.shape) or any(r < 0 for r in reps):
            raise self.fail(node, f"repeats {reps} must be {len(x.shape)} non-negative values")
        return [TensorInfo(x.dtype, tuple(d * r if isinstance(d, int) else None
                                          for d, r in zip(x.shape, reps)))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        return [np.tile(np.asarray(inputs[0]), [int(r) for r in np.asarray(inputs[1])])]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        require_values(node, "the repeats input", input_ints(self, node, values, 1))
        low = Lowering()
        if prod(static(outputs[0])):
            low.launch(tile, [In(0)], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        return [OpCase("basic", [x, np.array([2, 3], np.int64)]),
                OpCase("zero_rep", [x, np.array([0, 1], np.int64)]),
                OpCase("int32", [x.astype(np.int32), np.array([1, 2], np.int64)])]


OPS: list[type[OpDef]] = [Transpose, Concat, Split, Slice, Expand, Tile, *LAYOUT_OPS,
                          *INDEXING_OPS]
