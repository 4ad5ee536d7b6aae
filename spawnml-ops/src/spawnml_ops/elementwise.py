"""Elementwise unary math; activations live in ``activations`` (both registered here).

Each op is a kernel-language ``@helper`` for one element on the ``unary_base.UnaryOp``
pattern.
"""


from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import cast, cast_like, f32, helper
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import copy
from .unary_base import FLOATS, NUMERIC, SIGNED, SIGNED_INTS, UnaryOp, erf_np, sample, unary

# ------------------------------------------------------------------------------ helpers
# ruff: noqa: F821  (intrinsics such as exp, sqrt, sign are resolved by the kernel front end)
# Transcendentals compute in f32 (cast_like rounds back): native f16 versions are allowed
# errors of several f16 ulps (Vulkan), and float64 computes as f32 anyway.


@helper
def _relu(v):
    return max(v, 0)


@helper
def _abs(v):
    return abs(v)


@helper
def _neg(v):
    return -v


@helper
def _sign(v):
    return sign(v)


@helper
def _reciprocal(v):
    return 1.0 / v


@helper
def _sqrt(v):
    return sqrt(v)


@helper
def _exp(v):
    return cast_like(exp(cast(v, f32)), v)


@helper
def _log(v):
    return cast_like(log(cast(v, f32)), v)


@helper
def _floor(v):
    return floor(v)


@helper
def _ceil(v):
    return ceil(v)


@helper
def _round(v):
    return round(v)


@helper
def _erf(v):
    return cast_like(erf(cast(v, f32)), v)


@helper
def _sin(v):
    return cast_like(sin(cast(v, f32)), v)


@helper
def _cos(v):
    return cast_like(cos(cast(v, f32)), v)


@helper
def _tan(v):
    return cast_like(tan(cast(v, f32)), v)


@helper
def _asin(v):
    return cast_like(asin(cast(v, f32)), v)


@helper
def _acos(v):
    return cast_like(acos(cast(v, f32)), v)


@helper
def _atan(v):
    # NaN is passed through explicitly: lavapipe's atan(NaN) returns 0
    return v if isnan(v) else cast_like(atan(cast(v, f32)), v)


@helper
def _sinh(v):
    return cast_like(sinh(cast(v, f32)), v)


@helper
def _cosh(v):
    return cast_like(cosh(cast(v, f32)), v)


@helper
def _asinh(v):
    return cast_like(asinh(cast(v, f32)), v)


@helper
def _acosh(v):
    return cast_like(acosh(cast(v, f32)), v)


@helper
def _atanh(v):
    return cast_like(atanh(cast(v, f32)), v)


@helper
def _isnan(v):
    return isnan(v)


@helper
def _isinf(v, p):
    return (p[0] != 0.0 and v == math.inf) or (p[1] != 0.0 and v == -math.inf)


# ---------------------------------------------------------------------------------- ops


class Relu(UnaryOp):
    op_type = "Relu"
    since_version = 6
    fn = _relu
    numpy_fn = staticmethod(lambda x: np.maximum(x, 0))
    dtypes = FLOATS + SIGNED_INTS  # ints since opset 14


class Abs(UnaryOp):
    op_type = "Abs"
    since_version = 6
    fn = _abs
    numpy_fn = staticmethod(np.abs)
    dtypes = tuple(NUMERIC)

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        if inputs[0].dtype.is_unsigned_int:  # |x| == x; u32 has no negation
            low = Lowering()
            low.launch(copy, [In(0)], Out(0))
            return low
        return super().lower(node, inputs, outputs, values)


Neg = unary("Neg", 6, _neg, np.negative, SIGNED)
Sign = unary("Sign", 9, _sign, np.sign, NUMERIC)
Reciprocal = unary("Reciprocal", 6, _reciprocal, np.reciprocal)
Sqrt = unary("Sqrt", 6, _sqrt, np.sqrt, domain_range=(-1.0, 100.0))
Exp = unary("Exp", 6, _exp, np.exp, domain_range=(-80.0, 80.0))
Log = unary("Log", 6, _log, np.log, domain_range=(-1.0, 1e4))
Floor = unary("Floor", 6, _floor, np.floor, domain_range=(-50.0, 50.0))
Ceil = unary("Ceil", 6, _ceil, np.ceil, domain_range=(-50.0, 50.0))
Erf = unary("Erf", 9, _erf, erf_np)
Sin = unary("Sin", 7, _sin, np.sin, domain_range=(-20.0, 20.0))
Cos = unary("Cos", 7, _cos, np.cos, domain_range=(-20.0, 20.0))
Tan = unary("Tan", 7, _tan, np.tan, domain_range=(-1.4, 1.4))
Asin = unary("Asin", 7, _asin, np.arcsin, domain_range=(-1.1, 1.1))
Acos = unary("Acos", 7, _acos, np.arccos, domain_range=(-1.1, 1.1))
Atan = unary("Atan", 7, _atan, np.arctan, domain_range=(-50.0, 50.0))
Sinh = unary("Sinh", 9, _sinh, np.sinh, domain_range=(-10.0, 10.0))
Cosh = unary("Cosh", 9, _cosh, np.cosh, domain_range=(-10.0, 10.0))
Asinh = unary("Asinh", 9, _asinh, np.arcsinh, domain_range=(-100.0, 100.0))
Acosh = unary("Acosh", 9, _acosh, np.arccosh, domain_range=(0.5, 100.0))
Atanh = unary("Atanh", 9, _atanh, np.arctanh, domain_range=(-0.99, 0.99))
IsNaN = unary("IsNaN", 9, _isnan, np.isnan, out_dtype=DType.bool)


class Round(UnaryOp):
    op_type = "Round"
    since_version = 11
    fn = _round
    numpy_fn = staticmethod(np.rint)  # half to even, like ONNX

    def cases(self) -> list[OpCase]:
        halves = np.arange(-5.5, 6.0, 0.5, dtype=np.float32)
        return [*super().cases(), OpCase("halves", [halves]), OpCase("neg_zero",
                [np.array([-0.4, -0.0, 0.4, -0.5], np.float32)])]


class IsInf(UnaryOp):
    op_type = "IsInf"
    since_version = 10
    fn = _isinf
    out_dtype = DType.bool
    attributes = (("detect_positive", 1), ("detect_negative", 1))
    variants = ({"detect_positive": 0}, {"detect_negative": 0},
                {"detect_positive": 0, "detect_negative": 0})

    @staticmethod
    def numpy_fn(x: np.ndarray, pos: float, neg: float) -> np.ndarray:
        return (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))

    def params(self, node: Node) -> tuple[float, ...]:
        p = super().params(node)
        if any(v not in (0.0, 1.0) for v in p):
            raise self.fail(node, "detect_positive and detect_negative must be 0 or 1")
        return p


class Identity(OpDef):
    """Output aliases the input (a view; no kernel)."""

    op_type = "Identity"
    since_version = 1

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if not inputs or inputs[0] is None:
            raise self.fail(node, "input 0 is required")
        return [inputs[0]]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        value = inputs[0]
        if value is None or isinstance(value, list):  # an empty optional, a sequence
            return [value]
        return [np.array(value, copy=True)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        return Lowering(aliases={0: 0})

    def cases(self) -> list[OpCase]:
        return [OpCase("f32", [sample((2, 3), np.float32)]),
                OpCase("i64_scalar", [np.array(7, np.int64)]),
                OpCase("bool_empty", [np.zeros((0, 2), bool)]),
                OpCase("u8", [sample((5,), np.uint8, 0, 255)])]


from .activations import OPS as ACTIVATIONS  # noqa: E402  (after the math ops, by design)

MATH_OPS: list[type[OpDef]] = [
    Relu, Abs, Neg, Sign, Reciprocal, Sqrt, Exp, Log, Floor, Ceil, Round, Erf, Sin, Cos, Tan,
    Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, IsNaN, IsInf, Identity,
]


OPS: list[type[OpDef]] = MATH_OPS + ACTIVATIONS
