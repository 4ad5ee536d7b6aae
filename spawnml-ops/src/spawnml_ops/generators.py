"""Constants and generators: Constant, ConstantOfShape, Range, EyeLike, OneHot, Dropout
(inference), NonZero; the seeded random generators live in ``random_ops``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType, as_string_array, dtype as as_dtype
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, i32, kernel, static_range
from spawnml.op import Data, HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import copy, normalize_axis, static_shape
from .random_ops import RANDOM_OPS


def scalar_value(node: Node, value: np.ndarray | None, what: str) -> np.ndarray | None:
    """The single element of a scalar (or one-element) input, or None when unknown."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidModelError(f"{node.describe()}: {what} must hold exactly one element, "
                                f"got shape {arr.shape}")
    return arr.reshape(())


@kernel
def broadcast_first(v: Tensor, out: Output):
    """Every output element is ``v``'s first element (ConstantOfShape's fill)."""
    return cast(v.flat[0], out.dtype)


# -------------------------------------------------------------------------------- Constant


_CONSTANT_ATTRS = ("value", "sparse_value", "value_float", "value_floats", "value_int",
                   "value_ints", "value_string", "value_strings")


class Constant(OpDef):
    """A tensor given by exactly one ``value*`` attribute."""

    op_type = "Constant"
    since_version = 1

    def value(self, node: Node) -> np.ndarray:
        given = [a for a in _CONSTANT_ATTRS if a in node.attrs]
        if len(given) != 1:
            raise self.fail(node, f"needs exactly one of {list(_CONSTANT_ATTRS)}, got {given}")
        name = given[0]
        v = node.attrs[name]
        if name == "value_string":  # strings: object arrays of str, computed on the host
            return as_string_array(np.array(str(v), dtype=object))
        if name == "value_strings" or (isinstance(v, np.ndarray) and v.dtype.kind in "OSU"):
            return as_string_array(np.array(list(v) if name == "value_strings" else v,
                                            dtype=object)).reshape(np.shape(v))
        if name == "value_float":
            return np.array(v, np.float32)
        if name == "value_floats":
            return np.array(v, np.float32).reshape(-1)
        if name == "value_int":
            return np.array(v, np.int64)
        if name == "value_ints":
            return np.array(v, np.int64).reshape(-1)
        return np.asarray(v)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        v = self.value(node)
        return [TensorInfo(as_dtype(v.dtype), tuple(v.shape))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        return [self.value(node).copy()]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        v = self.value(node)
        if v.dtype == object:
            raise HostOnly(f"{node.describe()}: string constants stay on the host")
        low = Lowering()
        if v.size:
            low.launch(copy, [Data(np.ascontiguousarray(v))], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("tensor", [], {"value": np.arange(6, dtype=np.float32).reshape(2, 3)}),
            OpCase("int64_tensor", [], {"value": np.array([[-5, 2**40]], np.int64)}),
            OpCase("scalar", [], {"value": np.array(3.5, np.float32)}),
            OpCase("special", [], {"value": np.array([np.nan, np.inf, -np.inf], np.float32)}),
            OpCase("value_float", [], {"value_float": 2.5}, opset=12),
            OpCase("value_floats", [], {"value_floats": (1.0, -2.0)}, opset=12),
            OpCase("value_int", [], {"value_int": 7}, opset=12),
            OpCase("value_ints", [], {"value_ints": (1, 2, 3)}, opset=12),
        ]


# ------------------------------------------------------------------------- ConstantOfShape


class ConstantOfShape(OpDef):
    """A tensor of the shape given by input 0, filled with the ``value`` attribute."""

    op_type = "ConstantOfShape"
    since_version = 9
    value_inputs = (0,)

    def fill(self, node: Node) -> np.ndarray:
        v = np.asarray(self.attr(node, "value", np.zeros(1, np.float32)))
        if v.size != 1:
            raise self.fail(node, f"attribute 'value' must hold one element, got shape {v.shape}")
        if v.dtype.kind in "OSU":
            raise UnsupportedOpError(f"{node.describe()}: string values are not supported")
        return v.reshape(1)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        dt = as_dtype(self.fill(node).dtype)
        shape_info = inputs[0]
        if shape_info is None:
            raise self.fail(node, "input 0 (shape) is required")
        if shape_info.dtype is not DType.int64:
            raise self.fail(node, f"input 0 (shape) must be int64, got {shape_info.dtype}")
        if values[0] is not None:
            dims = np.asarray(values[0]).reshape(-1)
            if (dims < 0).any():
                raise self.fail(node, f"shape {dims.tolist()} has negative dimensions")
            return [TensorInfo(dt, tuple(int(d) for d in dims))]
        if shape_info.shape is not None and isinstance(shape_info.shape[0], int):
            return [TensorInfo(dt, (None,) * shape_info.shape[0])]
        return [TensorInfo(dt, None)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        dims = tuple(int(d) for d in np.asarray(inputs[0]).reshape(-1))
        return [np.full(dims, self.fill(node)[0])]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        if not outputs[0].is_static:
            raise HostOnly(f"{node.describe()}: the shape input is not known when planning")
        low = Lowering()
        low.launch(broadcast_first, [Data(self.fill(node))], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        shape = np.array([2, 3], np.int64)
        return [
            OpCase("default_zero", [shape]),
            OpCase("float_ones", [shape], {"value": np.array([1.0], np.float32)}),
            OpCase("int64", [np.array([4], np.int64)], {"value": np.array([-7], np.int64)}),
            OpCase("int32", [shape], {"value": np.array([9], np.int32)}),
            OpCase("bool", [shape], {"value": np.array([True])}),
            OpCase("nan", [shape], {"value": np.array([np.nan], np.float32)}),
            OpCase("scalar_shape", [np.zeros(0, np.int64)], {"value": np.array([5.0], np.float32)}),
            OpCase("size1_dims", [np.array([1, 1, 3], np.int64)]),
            OpCase("zero_dim", [np.array([0, 3], np.int64)]),
        ]


# ----------------------------------------------------------------------------------- Range


@kernel
def arange(start: Tensor, delta: Tensor, out: Output):
    return cast(start.flat[0], out.dtype) + cast(out.flat, out.dtype) * cast(delta.flat[0],
                                                                            out.dtype)


class Range(OpDef):
    """``start + i * delta`` for i in [0, max(ceil((limit - start) / delta), 0))."""

    op_type = "Range"
    since_version = 11
    value_inputs = (0, 1, 2)

    @staticmethod
    def count(start, limit, delta) -> int:
        if np.issubdtype(np.asarray(start).dtype, np.integer):
            s, lim, d = int(start), int(limit), int(delta)
            return max(-((s - lim) // d), 0)  # exact ceil division for integers
        return max(math.ceil((float(limit) - float(start)) / float(delta)), 0)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) != 3 or any(i is None for i in inputs):
            raise self.fail(node, "expects inputs start, limit, delta")
        dts = {i.dtype for i in inputs}  # type: ignore[union-attr]
        if len(dts) != 1:
            raise self.fail(node, f"start, limit and delta must share one dtype, got {dts}")
        dt = dts.pop()
        for i, info in enumerate(inputs):
            if info.shape is not None and any(d != 1 for d in info.shape):  # type: ignore[union-attr]
                raise self.fail(node, f"input {i} must be a scalar, got shape {info.shape}")  # type: ignore[union-attr]
        vals = [scalar_value(node, v, n) for v, n in zip(values, ("start", "limit", "delta"))]
        if any(v is None for v in vals):
            return [TensorInfo(dt, (None,))]
        if float(vals[2]) == 0:  # type: ignore[arg-type]
            raise self.fail(node, "delta must not be zero")
        if not all(np.isfinite(np.asarray(v, np.float64)) for v in vals):
            raise self.fail(node, f"start, limit and delta must be finite, got {vals}")
        return [TensorInfo(dt, (self.count(*vals),))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        start, limit, delta = (np.asarray(v).reshape(()) for v in inputs)
        n = self.count(start, limit, delta)
        if start.dtype.kind in "iu":
            return [(int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(start.dtype)]
        return [(float(start) + np.arange(n) * float(delta)).astype(start.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        if not outputs[0].is_static:
            raise HostOnly(f"{node.describe()}: start/limit/delta are not known when planning")
        low = Lowering()
        low.launch(arange, [In(0), In(2)], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        def c(name, s, lim, d, dt):
            return OpCase(name, [np.array(s, dt), np.array(lim, dt), np.array(d, dt)])

        return [
            c("float_positive", 1.0, 5.0, 0.5, np.float32),
            c("float_fractional_count", 0.0, 1.0, 0.3, np.float32),
            c("int32_negative_delta", 10, 4, -3, np.int32),
            c("int64", -3, 7, 2, np.int64),
            c("empty", 5, 1, 1, np.int64),
            c("single", 0.0, 0.5, 1.0, np.float32),
            c("int16", 1, 9, 4, np.int16),
            c("float16", 0.0, 3.0, 0.25, np.float16),
        ]


# --------------------------------------------------------------------------------- EyeLike


@kernel
def eye(out: Output, k: int):
    one = 1 if out.index[1] - out.index[0] == k else 0
    return cast(one, out.dtype)


class EyeLike(OpDef):
    """A 2-D identity-like tensor (ones on diagonal ``k``) of input 0's shape."""

    op_type = "EyeLike"
    since_version = 9

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None:
            raise self.fail(node, "input 0 is required")
        if x.shape is not None and len(x.shape) != 2:
            raise self.fail(node, f"input must be 2-D, got shape {x.shape}")
        dt = as_dtype(self.attr(node, "dtype")) if "dtype" in node.attrs else x.dtype
        if dt in (DType.bfloat16,):
            raise UnsupportedOpError(f"{node.describe()}: dtype {dt} is not supported")
        return [TensorInfo(dt, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        dt = as_dtype(self.attr(node, "dtype")).numpy if "dtype" in node.attrs else x.dtype
        return [np.eye(x.shape[0], x.shape[1], k=int(self.attr(node, "k", 0)), dtype=dt)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(eye, [], Out(0), k=int(self.attr(node, "k", 0)))
        return low

    def cases(self) -> list[OpCase]:
        x = np.zeros((3, 4), np.float32)
        return [
            OpCase("default", [x]),
            OpCase("k_positive", [x], {"k": 2}),
            OpCase("k_negative", [x], {"k": -1}),
            OpCase("k_out_of_range", [x], {"k": 9}),
            OpCase("dtype_int64", [x], {"dtype": 7}),
            OpCase("dtype_bool", [np.zeros((2, 2), np.int32)], {"dtype": 9}),
            OpCase("size1", [np.zeros((1, 5), np.int32)]),
        ]


# ---------------------------------------------------------------------------------- OneHot


@kernel
def one_hot(indices: Tensor, values: Tensor, out: Output, axis: int, depth: int):
    off = 0
    for d in static_range(out.ndim):
        if d < axis:
            off = off + out.index[d] * indices.strides[d]
        elif d > axis:
            off = off + out.index[d] * indices.strides[d - 1]
    idx = cast(indices.flat[off], i32)  # floats truncate toward zero, as onnx casts
    if idx < 0:
        idx = idx + depth
    return values.flat[1] if idx == out.index[axis] else values.flat[0]


class OneHot(OpDef):
    """``values[1]`` where the new ``axis`` equals the index, ``values[0]`` elsewhere."""

    op_type = "OneHot"
    since_version = 9
    value_inputs = (1,)
    edge_unspecified_inputs = (0,)  # float indices are truncated to integers

    def depth(self, node: Node, value: np.ndarray | None) -> int | None:
        v = scalar_value(node, value, "depth")
        if v is None:
            return None
        d = int(np.trunc(np.asarray(v, np.float64)))
        if d < 1:
            raise self.fail(node, f"depth must be positive, got {v}")
        return d

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) != 3 or any(i is None for i in inputs):
            raise self.fail(node, "expects inputs indices, depth, values")
        ind, _, vals = inputs
        if vals.shape is not None and tuple(vals.shape) not in ((2,), (None,)):  # type: ignore[union-attr]
            raise self.fail(node, f"values must have shape (2,), got {vals.shape}")  # type: ignore[union-attr]
        depth = self.depth(node, values[1])
        if ind.shape is None:  # type: ignore[union-attr]
            return [TensorInfo(vals.dtype, None)]  # type: ignore[union-attr]
        rank = len(ind.shape) + 1  # type: ignore[union-attr]
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), rank)
        shape = list(ind.shape)  # type: ignore[union-attr]
        shape.insert(axis, depth)
        return [TensorInfo(vals.dtype, tuple(shape))]  # type: ignore[union-attr]

    def reference(self, node, inputs) -> list[np.ndarray]:
        ind, depth_v, vals = (np.asarray(a) for a in inputs)
        depth = self.depth(node, depth_v)
        assert depth is not None
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), ind.ndim + 1)
        idx = np.trunc(ind.astype(np.float64)).astype(np.int64) if ind.dtype.kind == "f" \
            else ind.astype(np.int64)
        idx = np.where(idx < 0, idx + depth, idx)
        classes = np.arange(depth).reshape((-1,) + (1,) * (ind.ndim - axis))
        hot = np.expand_dims(idx, axis) == classes
        return [np.where(hot, vals.reshape(-1)[1], vals.reshape(-1)[0]).astype(vals.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        if not outputs[0].is_static:
            raise HostOnly(f"{node.describe()}: depth is not known when planning")
        rank = len(outputs[0].shape)  # type: ignore[arg-type]
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), rank)
        low = Lowering()
        low.launch(one_hot, [In(0), In(2)], Out(0), axis=axis,
                   depth=int(static_shape(outputs[0])[axis]))
        return low

    def cases(self) -> list[OpCase]:
        ind = np.array([[1, 9], [-1, 0]], np.int64)
        depth = np.array(4, np.int64)
        vals = np.array([0.0, 1.0], np.float32)
        return [
            OpCase("default_axis", [ind, depth, vals]),
            OpCase("axis0", [ind, depth, vals], {"axis": 0}),
            OpCase("axis1", [ind, depth, vals], {"axis": 1}),
            OpCase("negative_axis", [ind, depth, vals], {"axis": -2}),
            OpCase("float_indices", [np.array([0.7, 2.2, -1.5], np.float32),
                                     np.array(3.0, np.float32),
                                     np.array([-2, 5], np.int32)]),
            OpCase("scalar_indices", [np.array(2, np.int32), depth, vals]),
            OpCase("nan_values", [ind, depth, np.array([np.nan, np.inf], np.float32)]),
            OpCase("depth1", [np.array([[0], [1]], np.int64), np.array([1], np.int64), vals]),
        ]


# --------------------------------------------------------------------------------- Dropout


@kernel
def ones(out: Output):
    return cast(1, out.dtype)


class Dropout(OpDef):
    """Inference Dropout: output 0 is input 0 (a view); the optional mask is all ones.

    Training mode (random masks) is refused unless the ratio is 0, where it is the same."""

    op_type = "Dropout"
    since_version = 1
    value_inputs = (1, 2)

    def settings(
        self, node: Node, values: Sequence[np.ndarray | None]
    ) -> tuple[bool | None, float | None]:
        """(training, ratio); None where an input's value is unknown."""
        if node.opset < 12:
            ratio = float(self.attr(node, "ratio", 0.5))
            training = node.opset < 7 and not int(self.attr(node, "is_test", 0))
        else:
            r = scalar_value(node, values[1] if len(values) > 1 else None, "ratio")
            has_ratio = len(node.inputs) > 1 and node.inputs[1] != ""
            ratio = float(r) if r is not None else (None if has_ratio else 0.5)  # type: ignore[assignment]
            t = scalar_value(node, values[2] if len(values) > 2 else None, "training_mode")
            has_t = len(node.inputs) > 2 and node.inputs[2] != ""
            training = bool(t) if t is not None else (None if has_t else False)  # type: ignore[assignment]
        if ratio is not None and not 0.0 <= ratio < 1.0:
            raise self.fail(node, f"ratio must be in [0, 1), got {ratio}")
        if training and ratio:
            raise UnsupportedOpError(f"{node.describe()}: training-mode dropout (random masks, "
                                     f"ratio {ratio}) is not supported; spawnml runs inference")
        return training, ratio

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None:
            raise self.fail(node, "input 0 is required")
        self.settings(node, values)
        outs = [x]
        if len(node.outputs) > 1:
            outs.append(TensorInfo(DType.bool if node.opset >= 10 else x.dtype, x.shape))
        return outs

    def reference(self, node, inputs) -> list[np.ndarray]:
        self.settings(node, inputs)
        x = np.asarray(inputs[0])
        outs = [x.copy()]
        if len(node.outputs) > 1:
            outs.append(np.ones(x.shape, bool if node.opset >= 10 else x.dtype))
        return outs

    def lower(self, node, inputs, outputs, values) -> Lowering:
        training, ratio = self.settings(node, values)
        if training is None or ratio is None:
            raise HostOnly(f"{node.describe()}: ratio/training_mode are not known when planning")
        low = Lowering(aliases={0: 0})
        if len(outputs) > 1:
            low.launch(ones, [], Out(1))
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, -np.inf, np.nan], [0.5, 2.0, 3.0]], np.float32)
        return [
            OpCase("default", [x], opset=13),
            OpCase("mask", [x], opset=13, n_outputs=2),
            OpCase("ratio_input", [x, np.array(0.3, np.float32)], opset=13, n_outputs=2),
            OpCase("training_zero_ratio", [x, np.array(0.0, np.float32), np.array(True)],
                   opset=13, n_outputs=2),
            OpCase("opset7_mask_same_dtype", [x], {"ratio": 0.2}, opset=7, n_outputs=2),
            OpCase("opset6_is_test", [x], {"is_test": 1}, opset=6),
            OpCase("size1", [np.ones((1, 1), np.float32)], opset=13, n_outputs=2),
        ]


# --------------------------------------------------------------------------------- NonZero


class NonZero(OpDef):
    """Indices of the non-zero elements, (rank, count): data-dependent, so host only."""

    op_type = "NonZero"
    since_version = 9
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None:
            raise self.fail(node, "input 0 is required")
        rank = None if x.shape is None else max(len(x.shape), 1)
        return [TensorInfo(DType.int64, None if rank is None else (rank, None))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [np.array(np.nonzero(x.reshape(1) if x.ndim == 0 else x), dtype=np.int64)]

    def cases(self) -> list[OpCase]:
        return [
            OpCase("matrix", [np.array([[1, 0], [1, 1]], np.int32)]),
            OpCase("float_nan", [np.array([0.0, np.nan, -0.0, 2.0], np.float32)]),
            OpCase("bool", [np.array([[[True, False, True]]])]),
            OpCase("all_zero", [np.zeros((2, 3), np.float32)]),
            OpCase("scalar", [np.array(5, np.int64)]),
        ]


OPS: list[type[OpDef]] = [Constant, ConstantOfShape, Range, EyeLike, OneHot, Dropout, NonZero,
                          *RANDOM_OPS]
