"""Binary and variadic arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Mod, Pow,
Min, Max, Sum, Mean. ``BinaryOp`` is also the base of the comparisons and logic ops, and
reads B as opsets 1-6's ``broadcast``/``axis`` attributes say (``legacy_broadcast``)."""


from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from spawnml.dtypes import DType
from spawnml.graph.fusion import fused_activation
from spawnml.kernel import Helper, bitcast, cast, cast_like, f32, helper, i32
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import (
    binary_map,
    broadcast_shapes,
    check_dtype,
    copy,
    fold_binary,
    present_inputs,
    same_dtype,
    unary_map_params,
)
from .fused import activation_args, binary_map_act
from .legacy_broadcast import (
    LEGACY_UNTIL,
    Shape,
    is_legacy,
    legacy_cases,
    legacy_operand_shape,
    read_as,
)
from .unary_base import FLOATS, NUMERIC, sample

# ruff: noqa: F821  (intrinsics such as fmod, pow, truncdiv are resolved by the kernel front end)

_CASE_DTYPES = (DType.float16, DType.bfloat16, DType.float64, DType.int8, DType.int16,
                DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32, DType.uint64,
                DType.bool)


def sample_pair(dt: DType, lo: float, hi: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    if dt.is_unsigned_int:
        lo = max(lo, 0)
    return (sample((3, 4), dt.numpy, lo, hi, seed), sample((4,), dt.numpy, lo, hi, seed + 1))


class BinaryOp(OpDef):
    """Two same-dtype inputs broadcast together; ``fn`` computes one element."""

    fn: Helper
    numpy_fn: Callable[..., np.ndarray]
    dtypes: Sequence[DType] = NUMERIC
    out_dtype: ClassVar[DType | None] = None  # None: the inputs' dtype
    value_range: ClassVar[tuple[float, float]] = (-10.0, 10.0)
    tol: ClassVar[dict[str, float]] = {"rtol": 1e-6, "atol": 1e-6}

    def check(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        """Validate dtypes and attributes; the output dtype."""
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects two inputs")
        dt = same_dtype(node, inputs)
        check_dtype(node, dt, self.dtypes)
        return self.out_dtype or dt

    def operand_shape(self, node: Node, a: Shape | None, b: Shape | None) -> Shape | None:
        """The shape B is read as: its own, or before opset 7 the one its ``broadcast`` and
        ``axis`` attributes give it (:mod:`.legacy_broadcast`)."""
        if not is_legacy(node) or a is None or b is None:
            return b
        return legacy_operand_shape(self, node, a, b)

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        dt = self.check(node, inputs)
        a, b = inputs[0].shape, inputs[1].shape  # type: ignore[union-attr]
        return [TensorInfo(dt, broadcast_shapes(node, a, self.operand_shape(node, a, b)))]

    def numpy(self, node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return type(self).numpy_fn(a, b)

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        a, b = (np.asarray(x) for x in inputs)
        b = b.reshape(self.operand_shape(node, a.shape, b.shape))
        out = self.out_dtype.numpy if self.out_dtype else a.dtype
        with np.errstate(all="ignore"):
            return [np.asarray(self.numpy(node, a, b)).astype(out)]

    def helper_for(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Helper:
        return type(self).fn

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        fn = self.helper_for(node, inputs)
        a, b = inputs[0], inputs[1]
        rhs = read_as(low, 1, b.dtype, self.operand_shape(node, a.shape, b.shape), b.shape)
        if fused_activation(node) is None:
            low.launch(binary_map, [In(0), rhs], Out(0), fn=fn)
        else:
            low.launch(binary_map_act, [In(0), rhs], Out(0), fn=fn, **activation_args(node))
        return low

    def case_attrs(self) -> list[dict[str, Any]]:
        return [{}]

    def cases(self) -> list[OpCase]:
        lo, hi = self.value_range
        first = self.dtypes[0]
        f = first.numpy
        if first.is_unsigned_int:
            lo = max(lo, 0)
        tol = dict(self.tol)
        base: list[tuple[str, list[np.ndarray]]] = [
            ("bcast", [sample((2, 3, 4), f, lo, hi, 1), sample((3, 1), f, lo, hi, 2, False)]),
            ("scalar", [sample((3, 4), f, lo, hi, 3), sample((), f, lo, hi, 11, False)]),
            ("scalar_lhs", [sample((), f, lo, hi, 12, False), sample((5,), f, lo, hi, 4)]),
            ("size1", [sample((1, 4), f, lo, hi, 5, False), sample((3, 1), f, lo, hi, 6, False)]),
            ("empty", [np.zeros((0, 3), f), sample((1, 3), f, lo, hi, 7)]),
        ]
        if first.is_float:
            base.append(("specials", [np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0], f),
                                      np.array([1.0, np.inf, 2.0, -0.0, np.nan, -np.inf], f)]))
        base += [(str(dt), list(sample_pair(dt, lo, hi, 8)))
                 for dt in _CASE_DTYPES if dt in self.dtypes and dt != first]
        return [OpCase(f"{name}_{k}" if len(self.case_attrs()) > 1 else name, inputs,
                       dict(attrs), **tol)
                for k, attrs in enumerate(self.case_attrs()) for name, inputs in base
                ] + self.legacy_cases()

    def legacy_cases(self) -> list[OpCase]:
        """Cases of the ``broadcast``/``axis`` attributes, for ops defined before opset 7."""
        if self.since_version >= LEGACY_UNTIL:
            return []
        lo, hi = self.value_range
        f = self.dtypes[0].numpy
        return legacy_cases(lambda shape, seed: sample(shape, f, lo, hi, seed), **self.tol)


def binary(op_type: str, since: int, fn: Helper, numpy_fn: Callable[..., np.ndarray],
           dtypes: Sequence[DType] = NUMERIC, base: type[OpDef] = BinaryOp,
           **extra: Any) -> Any:
    """Declare a BinaryOp subclass (most ops differ only in these fields)."""
    body = {"op_type": op_type, "since_version": since, "fn": fn,
            "numpy_fn": staticmethod(numpy_fn), "dtypes": tuple(dtypes), **extra}
    return type(op_type, (base,), body)


# ------------------------------------------------------------------------------ helpers


@helper
def _add(a, b):
    return a + b


@helper
def _sub(a, b):
    return a - b


@helper
def _mul(a, b):
    return a * b


@helper
def _div_float(a, b):
    return a / b


@helper
def _div_int(a, b):
    return truncdiv(a, b)


@helper
def _min(a, b):
    return min(a, b)


@helper
def _max(a, b):
    return max(a, b)


@helper
def _fmod_float(a, b):
    # C fmod, with fmod(x, ±inf) == x for finite x on every target (polyfills divide)
    return a if isinf(b) and not isinf(a) and not isnan(a) else fmod(a, b)


@helper
def _mod_float(a, b):
    r = _fmod_float(a, b)
    s = r + b if r != 0.0 and (r < 0.0) != (b < 0.0) else r
    return s if s != 0.0 else sign(b) * 0.0  # a zero result takes the divisor's sign


@helper
def _fmod_int(a, b):
    return truncmod(a, b)


@helper
def _mod_int(a, b):
    return a % b


@helper
def _pow_f32(a, y):
    # C pow: pow(x, 0) == pow(1, y) == 1 even for NaN, pow(-1, +-inf) = 1, pow(+-0, y < 0)
    # = +-inf; a finite negative base needs an integral exponent; a negative base (-0 and
    # -inf included) takes its sign from an odd one. Spelled out because WGSL/GLSL pow is
    # exp2(y*log2(x)), undefined at 0 and below.
    ax = abs(a)
    m = 1.0 if ax == 1.0 else (math.inf if ax == 0.0 and y < 0.0 else pow(ax, y))
    whole = floor(y) == y
    odd = whole and abs(fmod(y, 2.0)) == 1.0
    r = -m if bitcast(a, i32) < 0 and odd else m
    r = math.nan if a < 0.0 and a > -math.inf and not whole else r
    return 1.0 if y == 0.0 or a == 1.0 else (math.nan if isnan(a) or isnan(y) else r)


def _c_pow(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C pow (onnxruntime's std::pow) in numpy: np.power takes shortcuts for some exponents
    (sqrt for 0.5: pow(-inf, 0.5) = nan, pow(-0, 0.5) = -0) that C pow does not."""
    with np.errstate(all="ignore"):
        ax = np.abs(a)
        m = np.where(ax == 1, 1.0, np.power(ax, y))
        whole = np.floor(y) == y
        odd = whole & (np.abs(np.fmod(y, 2)) == 1)
        r = np.where(np.signbit(a) & odd, -m, m)
        r = np.where((a < 0) & (a > -np.inf) & ~whole, np.nan, r)
        return np.where((y == 0) | (a == 1), 1.0, np.where(np.isnan(a) | np.isnan(y), np.nan, r))


@helper
def _pow_float(a, b):
    return cast_like(_pow_f32(cast(a, f32), cast(b, f32)), a)


@helper
def _pow_int_float(a, b):
    return cast_like(_pow_f32(cast(a, f32), cast(b, f32)), a)


@helper
def _pow_int(a, b):
    # exact integer power by squaring; negative exponents truncate 1 / a**|b| toward zero
    e = cast_like(b, a)
    r = cast_like(1, a)
    p = a
    for _ in range(0, 64):
        if (e & 1) == 1:
            r = r * p
        p = p * p
        e = e >> 1
    inv = cast_like(1, a) if a == 1 else ((cast_like(-1, a) if (b & 1) == 1 else r * 0 + 1)
                                           if a == -1 else r * 0)
    return r if b >= 0 else inv


@helper
def _scale(v, p):
    return v / p[0]


# ---------------------------------------------------------------------------------- ops


def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":  # C truncation, as onnx.reference; x / 0 == 0
        q = np.floor_divide(a, b)
        r = np.remainder(a, b)
        return q + ((r != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)
    return np.divide(a.astype(np.float64), b)


Add = binary("Add", 1, _add, np.add, fusable_activations=frozenset({"Relu"}))  # residuals
Sub = binary("Sub", 1, _sub, np.subtract)
Mul = binary("Mul", 1, _mul, np.multiply)


class Div(BinaryOp):
    op_type = "Div"
    since_version = 1
    numpy_fn = staticmethod(_np_div)

    def helper_for(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Helper:
        return _div_float if inputs[0].dtype.is_float else _div_int  # type: ignore[union-attr]


class Mod(BinaryOp):
    """fmod=0: Python remainder (sign of the divisor); fmod=1: C fmod (sign of the dividend)."""

    op_type = "Mod"
    since_version = 10
    value_range = (-10.0, 10.0)

    def fmod(self, node: Node, dt: DType) -> int:
        v = self.attr(node, "fmod", 0)
        if v not in (0, 1):
            raise self.fail(node, f"attribute 'fmod' must be 0 or 1, got {v!r}")
        if dt.is_float and v == 0 and node.opset < 28:
            raise self.fail(node, "fmod must be 1 for floating-point inputs before opset 28")
        return int(v)

    def check(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        dt = super().check(node, inputs)
        self.fmod(node, dt)
        return dt

    def numpy(self, node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        fn = np.fmod if self.fmod(node, DType(a.dtype.name)) else np.mod
        return fn(a, b)

    def helper_for(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Helper:
        dt = inputs[0].dtype  # type: ignore[union-attr]
        if self.fmod(node, dt):
            return _fmod_float if dt.is_float else _fmod_int
        return _mod_float if dt.is_float else _mod_int

    def case_attrs(self) -> list[dict[str, Any]]:
        return [{"fmod": 0}, {"fmod": 1}]

    def cases(self) -> list[OpCase]:
        cases = super().cases()
        edges = [np.array([5.0, -5.0, 0.0, -0.0, np.inf, 3.0, 7.5, -7.5], np.float32),
                 np.array([np.inf, np.inf, -3.0, 3.0, 2.0, 0.0, -2.0, 2.0], np.float32)]
        ints = [np.array([7, -7, 7, -7, 0, 5], np.int32), np.array([2, 2, -2, -2, 3, 0], np.int32)]
        for fm in (0, 1):
            cases.append(OpCase(f"float_edges_{fm}", edges, {"fmod": fm}, opset=28))
            cases.append(OpCase(f"int_signs_{fm}", ints, {"fmod": fm}, opset=28))
        return [c if c.opset else OpCase(c.name, c.inputs, c.attrs, 28, c.rtol, c.atol)
                for c in cases]


class Pow(BinaryOp):
    """Base and exponent may have different dtypes; the result has the base's dtype."""

    op_type = "Pow"
    since_version = 1
    dtypes = (*FLOATS, DType.int32, DType.int64)
    exponent_dtypes: ClassVar[tuple[DType, ...]] = NUMERIC
    tol: ClassVar[dict[str, float]] = {"rtol": 1e-5, "atol": 1e-6}

    def check(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects two inputs")
        check_dtype(node, inputs[0].dtype, self.dtypes, "base")
        check_dtype(node, inputs[1].dtype, NUMERIC, "exponent")
        return inputs[0].dtype

    def numpy(self, node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "i" and b.dtype.kind in "iu":
            e = b.astype(np.int64)
            r = np.power(a.astype(np.int64), np.maximum(e, 0))
            inv = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 1, -1, 1), 0))
            return np.where(e >= 0, r, inv)
        return _c_pow(a.astype(np.float64), b.astype(np.float64))

    def helper_for(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Helper:
        base, exp = inputs[0].dtype, inputs[1].dtype  # type: ignore[union-attr]
        if base.is_float:
            return _pow_float
        return _pow_int if not exp.is_float else _pow_int_float

    def cases(self) -> list[OpCase]:
        f = np.float32
        x = np.array([[2.0, -2.0, 0.5, -0.5], [np.nan, np.inf, -np.inf, 0.0],
                      [1.5, -3.0, 10.0, 1.0]], f)
        return [
            OpCase("f32_bcast", [x, np.array([2.0, 3.0, -1.0, 0.5], f)], **self.tol),
            OpCase("f32_scalar_exp", [x, np.array(3.0, f)], **self.tol),
            OpCase("f32_int32_exp", [x, np.array([2, 3, -2, 0], np.int32)], **self.tol),
            OpCase("f32_int64_exp", [x, np.array([[1], [2], [3]], np.int64)], **self.tol),
            OpCase("f32_uint8_exp", [x, np.array([0, 1, 2, 3], np.uint8)], **self.tol),
            OpCase("f16", [x.astype(np.float16), np.array([2.0], np.float16)], **self.tol),
            OpCase("f64", [x.astype(np.float64), np.array(0.5)], **self.tol),
            OpCase("empty", [np.zeros((0, 4), f), np.array(2.0, f)]),
            OpCase("i32_i32", [np.array([1, 2, -3, 4, -1, 0, 7], np.int32),
                               np.array([4, 5, 3, 0, 7, 2, 9], np.int32)]),
            OpCase("i64_i64", [np.array([3, -2, 10, 1], np.int64),
                               np.array([[20], [3]], np.int64)]),
            OpCase("i32_f32", [np.array([1, 2, 3, -2], np.int32),
                               np.array([4.0, 0.5, 2.5, 3.0], f)]),
            OpCase("i64_f32", [np.array([1, 2, 3, 9], np.int64),
                               np.array([4.0, 5.0, 6.0, 0.5], f)]),
            *self.legacy_cases(),
        ]


class Variadic(OpDef):
    """N >= 1 same-dtype inputs broadcast together, folded pairwise left to right."""

    fn: Helper
    numpy_fn: Callable[..., np.ndarray]
    dtypes: Sequence[DType] = NUMERIC

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        infos = present_inputs(node, inputs)
        dt = same_dtype(node, infos)
        check_dtype(node, dt, self.dtypes)
        return [TensorInfo(dt, broadcast_shapes(node, *[i.shape for i in infos]))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in inputs]
        acc = arrays[0]
        with np.errstate(all="ignore"):
            for a in arrays[1:]:
                acc = type(self).numpy_fn(acc, a)
            return [np.asarray(self.finish(acc, len(arrays))).astype(arrays[0].dtype)]

    def finish(self, acc: np.ndarray, n: int) -> np.ndarray:
        return acc

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if len(inputs) == 1:
            low.launch(copy, [In(0)], Out(0))
        else:
            fold_binary(low, inputs, outputs[0].dtype, type(self).fn, Out(0))
        return low

    def cases(self) -> list[OpCase]:
        f = np.float32
        a, b, c = (sample(s, f, -5, 5, i) for i, s in enumerate([(3, 1), (1, 4), (2, 3, 4)]))
        cases = [
            OpCase("one", [a]),
            OpCase("two_bcast", [a, b]),
            OpCase("three_bcast", [a, b, c]),
            OpCase("four_scalar", [a, np.array(2.5, f), b, np.array(-1.0, f)]),
            OpCase("empty", [np.zeros((0, 4), f), b]),
            OpCase("f16", [a.astype(np.float16), b.astype(np.float16)]),
            OpCase("f64", [a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)]),
        ]
        for dt in (DType.int8, DType.int32, DType.int64, DType.uint8, DType.uint32):
            if dt in self.dtypes:
                lo = 0 if dt.is_unsigned_int else -50
                cases.append(OpCase(str(dt), [sample((2, 3), dt.numpy, lo, 50, 9),
                                              sample((3,), dt.numpy, lo, 50, 10)]))
        return cases


class Mean(Variadic):
    op_type = "Mean"
    since_version = 6
    fn = _add
    numpy_fn = staticmethod(lambda a, b: a.astype(np.float64) + b)
    dtypes = FLOATS

    def finish(self, acc: np.ndarray, n: int) -> np.ndarray:
        return acc / n

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        if len(inputs) == 1:
            return super().lower(node, inputs, outputs, values)
        low = Lowering()
        total = low.temp(outputs[0].dtype, outputs[0].shape)
        fold_binary(low, inputs, outputs[0].dtype, _add, total)
        low.launch(unary_map_params, [total], Out(0), fn=_scale, params=(float(len(inputs)),))
        return low


Sum = binary("Sum", 6, _add, lambda a, b: a.astype(np.float64) + b, FLOATS, Variadic)
Max = binary("Max", 6, _max, np.maximum, tuple(d for d in NUMERIC), Variadic)
Min = binary("Min", 6, _min, np.minimum, tuple(d for d in NUMERIC), Variadic)

OPS: list[type[OpDef]] = [Add, Sub, Mul, Div, Mod, Pow, Sum, Mean, Max, Min]
