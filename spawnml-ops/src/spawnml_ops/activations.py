"""Activation functions (registered through ``elementwise.OPS``), PRelu and Clip."""


from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import cast, cast_like, f32, helper
from spawnml.kernel.polyfills_math import expm1_f32, log1p_f32
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import binary_map, broadcast_shapes, check_dtype, copy, ternary_map, unary_map_params
from .legacy_broadcast import Shape, channel_slope_shape, is_legacy, read_as
from .unary_base import FLOATS, NUMERIC, UnaryOp, erf_np, sample, unary

# ruff: noqa: F821  (intrinsics such as exp, tanh, erf are resolved by the kernel front end)

# ------------------------------------------------------------------------------ helpers


@helper
def _softplus(v):
    # max(v, 0) + log(1 + exp(-|v|)) never overflows, unlike log(1 + exp(v)); f32 math
    # (native f16 transcendentals may be several ulps off)
    f = cast(v, f32)
    return cast_like(max(f, 0.0) + log1p_f32(exp(-abs(f))), v)


@helper
def _leaky_relu(v, p):
    return v if v >= 0.0 else v * p[0]


@helper
def _elu(v, p):
    return v if v > 0.0 else cast_like(p[0] * expm1_f32(cast(v, f32)), v)


@helper
def _selu(v, p):
    f = cast(v, f32)
    return cast_like(p[1] * (f if f > 0.0 else p[0] * expm1_f32(f)), v)


@helper
def _celu(v, p):
    f = cast(v, f32)
    return cast_like(max(f, 0.0) + min(0.0, p[0] * expm1_f32(f / p[0])), v)


@helper
def _gelu_erf(v):
    f = cast(v, f32)
    return cast_like(0.5 * f * (1.0 + erf(f * 0.7071067811865476)), v)


@helper
def _gelu_tanh(v):
    f = cast(v, f32)
    return cast_like(0.5 * f * (1.0 + tanh(0.7978845608028654 * (f + 0.044715 * f * f * f))), v)


@helper
def _hard_sigmoid(v, p):
    return max(0.0, min(1.0, p[0] * v + p[1]))


@helper
def _hard_swish(v):
    return v * max(0.0, min(1.0, v * 0.16666666666666666 + 0.5))


@helper
def _sigmoid(v):
    return cast_like(1.0 / (1.0 + exp(-cast(v, f32))), v)


@helper
def _swish(v, p):
    # x * sigmoid(alpha * x), the sigmoid rounded to the input type (as onnx.reference)
    f = cast(v, f32)
    sig = cast_like(1.0 / (1.0 + exp(-p[0] * f)), v)
    return cast_like(f * cast(sig, f32), v)


@helper
def _tanh(v):
    return cast_like(tanh(cast(v, f32)), v)


@helper
def _softplus_op(v):
    return _softplus(v)


@helper
def _softsign(v):
    return v / (1.0 + abs(v))


@helper
def _mish(v):
    f = cast(v, f32)
    return cast_like(f * tanh(_softplus(f)), v)


@helper
def _thresholded_relu(v, p):
    return v if v > p[0] else 0.0


@helper
def _shrink(v, p):
    # computed in f32 so integer inputs work too (ONNX Shrink accepts every numeric type)
    f = cast(v, f32)
    r = f + p[0] if f < -p[1] else (f - p[0] if f > p[1] else 0.0)
    return cast_like(r, v)


@helper
def _prelu(v, s):
    return v if v >= 0 else v * s


@helper
def clip_attrs(v, p):
    return min(max(v, p[0]), p[1])


@helper
def _clip_lo(v, lo):
    return max(v, lo)


@helper
def _clip_hi(v, hi):
    return min(v, hi)


@helper
def _clip(v, lo, hi):
    return min(max(v, lo), hi)


# ---------------------------------------------------------------------- numpy references


def _np_softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _np_elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(x))


def _np_shrink(x: np.ndarray, bias: float, lambd: float) -> np.ndarray:
    f = x.astype(np.float64)
    return np.where(f < -lambd, f + bias, np.where(f > lambd, f - bias, 0.0))


# ---------------------------------------------------------------------------------- ops

_FLT_MAX = float(np.finfo(np.float32).max)
_COMPOSITE_TOL = {"rtol": 2e-5, "atol": 2e-5}

Sigmoid = unary("Sigmoid", 6, _sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)),
                domain_range=(-30.0, 30.0))
Tanh = unary("Tanh", 6, _tanh, np.tanh, domain_range=(-10.0, 10.0))
Softplus = unary("Softplus", 1, _softplus_op, _np_softplus, domain_range=(-30.0, 30.0))
Softsign = unary("Softsign", 1, _softsign, lambda x: x / (1.0 + np.abs(x)))
HardSwish = unary("HardSwish", 14, _hard_swish,
                  lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0), domain_range=(-6.0, 6.0))
Mish = unary("Mish", 18, _mish, lambda x: x * np.tanh(_np_softplus(x)),
             domain_range=(-10.0, 10.0), tol=_COMPOSITE_TOL)
Swish = unary("Swish", 24, _swish, lambda x, alpha: x / (1.0 + np.exp(-alpha * x)),
              attributes=(("alpha", 1.0),), variants=({"alpha": 1.702}, {"alpha": -0.5}),
              domain_range=(-10.0, 10.0))
LeakyRelu = unary("LeakyRelu", 6, _leaky_relu,
                  lambda x, alpha: np.where(x >= 0, x, x * alpha),
                  attributes=(("alpha", 0.01),), variants=({"alpha": 0.5}, {"alpha": -2.0}))
Elu = unary("Elu", 6, _elu, _np_elu, attributes=(("alpha", 1.0),),
            variants=({"alpha": 2.0},), tol=_COMPOSITE_TOL)
Selu = unary("Selu", 6, _selu, lambda x, a, g: g * _np_elu(x, a),
             attributes=(("alpha", 1.67326319217681884765625),
                         ("gamma", 1.05070102214813232421875)),
             variants=({"alpha": 2.0, "gamma": 3.0},), tol=_COMPOSITE_TOL)
HardSigmoid = unary("HardSigmoid", 6, _hard_sigmoid,
                    lambda x, a, b: np.clip(a * x + b, 0.0, 1.0),
                    attributes=(("alpha", 0.2), ("beta", 0.5)),
                    variants=({"alpha": 0.5, "beta": 0.6},))
ThresholdedRelu = unary("ThresholdedRelu", 10, _thresholded_relu,
                        lambda x, alpha: np.where(x > alpha, x, 0.0),
                        attributes=(("alpha", 1.0),), variants=({"alpha": -0.5}, {"alpha": 2.0}))
Shrink = unary("Shrink", 9, _shrink, _np_shrink, NUMERIC,
               attributes=(("bias", 0.0), ("lambd", 0.5)),
               variants=({"bias": 1.5, "lambd": 1.5}, {"bias": -0.5, "lambd": 0.0}))


class Celu(UnaryOp):
    op_type = "Celu"
    since_version = 12
    fn = _celu
    attributes = (("alpha", 1.0),)
    variants = ({"alpha": 2.0}, {"alpha": 0.5})
    tol = _COMPOSITE_TOL

    @staticmethod
    def numpy_fn(x: np.ndarray, alpha: float) -> np.ndarray:
        return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))

    def params(self, node: Node) -> tuple[float, ...]:
        p = super().params(node)
        if p[0] == 0.0:
            raise self.fail(node, "attribute 'alpha' must be non-zero")
        return p


class Gelu(UnaryOp):
    op_type = "Gelu"
    since_version = 20
    variants = ({"approximate": "tanh"}, {"approximate": "none"})
    tol = _COMPOSITE_TOL

    def approximate(self, node: Node) -> str:
        mode = self.attr(node, "approximate", "none")
        if mode not in ("none", "tanh"):
            raise self.fail(node, f"attribute 'approximate' must be 'none' or 'tanh', got {mode!r}")
        return mode

    def params(self, node: Node) -> tuple[float, ...]:
        self.approximate(node)
        return ()

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        f = x.astype(np.float64)
        with np.errstate(all="ignore"):
            if self.approximate(node) == "tanh":
                y = 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f**3)))
            else:
                y = 0.5 * f * (1 + erf_np(f / math.sqrt(2)))
        return [y.astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        from .common import unary_map

        low = Lowering()
        fn = _gelu_tanh if self.approximate(node) == "tanh" else _gelu_erf
        low.launch(unary_map, [In(0)], Out(0), fn=fn)
        return low


class PRelu(OpDef):
    """x if x >= 0 else slope * x; ``slope`` broadcasts to x (unidirectionally); before
    opset 7 a one-dimensional slope is per channel (axis 1)."""

    op_type = "PRelu"
    since_version = 1
    dtypes: ClassVar[tuple] = (*FLOATS, DType.int32, DType.int64, DType.uint32)

    def slope_shape(self, node: Node, x: Shape | None, slope: Shape | None) -> Shape | None:
        """The shape the slope is read as (:mod:`.legacy_broadcast`)."""
        if not is_legacy(node) or x is None or slope is None:
            return slope
        return channel_slope_shape(self, node, x, slope)

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs X and slope")
        x, s = inputs
        check_dtype(node, x.dtype, self.dtypes)
        if s.dtype != x.dtype:
            raise self.fail(node, f"slope dtype {s.dtype} differs from X dtype {x.dtype}")
        shape = broadcast_shapes(node, x.shape, self.slope_shape(node, x.shape, s.shape))
        if shape is not None and x.shape is not None and len(shape) != len(x.shape):
            raise self.fail(node, f"slope shape {s.shape} does not broadcast to X {x.shape}")
        if x.shape is not None and shape is not None and any(
            isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(x.shape, shape)
        ):
            raise self.fail(node, f"slope shape {s.shape} does not broadcast to X {x.shape}")
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x, s = (np.asarray(a) for a in inputs)
        s = s.reshape(self.slope_shape(node, x.shape, s.shape))
        return [np.where(x >= 0, x, x * s).astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        x, s = inputs[0], inputs[1]
        slope = read_as(low, 1, s.dtype, self.slope_shape(node, x.shape, s.shape), s.shape)
        low.launch(binary_map, [In(0), slope], Out(0), fn=_prelu)
        return low

    def cases(self) -> list[OpCase]:
        x = sample((2, 3, 4), np.float32, seed=1)
        return [
            OpCase("channel_slope", [x, np.array([[0.1], [0.2], [-0.3]], np.float32)]),
            OpCase("scalar_slope", [x, np.array(0.25, np.float32)]),
            OpCase("full_slope", [x, sample((2, 3, 4), np.float32, 0, 1, 2, False)]),
            OpCase("size1_slope", [x, np.array([0.5], np.float32)]),
            OpCase("empty", [np.zeros((0, 4), np.float32), np.array([0.5], np.float32)]),
            OpCase("f16", [sample((3, 4), np.float16, seed=3), np.array([2.0], np.float16)]),
            OpCase("i32", [sample((3, 4), np.int32, -9, 9, 4), np.array([3], np.int32)]),
            OpCase("legacy_channel_slope", [x, np.array([0.1, 0.2, -0.3], np.float32)],
                   opset=6),
            OpCase("legacy_shared_slope", [x, np.array([0.5], np.float32)], opset=6),
        ]


class Clip(OpDef):
    """Clip: ``min``/``max`` attributes before opset 11, optional scalar inputs after."""

    op_type = "Clip"
    since_version = 6

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if not inputs or inputs[0] is None:
            raise self.fail(node, "input 0 is required")
        x = inputs[0]
        if node.opset < 11:
            check_dtype(node, x.dtype, FLOATS)
            self.bounds(node)
            if len(inputs) > 1:
                raise self.fail(node, "takes one input before opset 11 (bounds are attributes)")
            return [x]
        check_dtype(node, x.dtype, NUMERIC)
        if len(inputs) > 3:
            raise self.fail(node, "takes at most 3 inputs (input, min, max)")
        for i, b in enumerate(inputs[1:], 1):
            if b is None:
                continue
            if b.dtype != x.dtype:
                raise self.fail(node, f"input {i} dtype {b.dtype} differs from {x.dtype}")
            shape = b.shape
            if shape is not None and (len(shape) > 1 or (shape and shape[0] not in (1, None))):
                raise self.fail(node, f"input {i} must be a scalar, got shape {b.shape}")
        return [x]

    def bounds(
        self, node: Node, constants: Sequence[np.ndarray | None] = ()
    ) -> tuple[float, float]:
        """(min, max): the attributes before opset 11, else the constant ``min``/``max``
        inputs (±inf when omitted)."""
        if node.opset >= 11:
            given = [*constants, None, None][:2]
            lo, hi = (
                default if v is None else float(np.asarray(v).reshape(()))
                for v, default in zip(given, (-math.inf, math.inf))
            )
            return lo, hi
        # Clip-6 defaults are the float32 limits, so ±inf inputs clip to them
        lo = self.attr(node, "min", -_FLT_MAX)
        hi = self.attr(node, "max", _FLT_MAX)
        for name, v in (("min", lo), ("max", hi)):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise self.fail(node, f"attribute {name!r} must be a float, got {v!r}")
        return float(lo), float(hi)

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if node.opset < 11:
            lo, hi = self.bounds(node)
        else:
            lo = None if len(inputs) < 2 or inputs[1] is None else np.asarray(inputs[1]).reshape(())
            hi = None if len(inputs) < 3 or inputs[2] is None else np.asarray(inputs[2]).reshape(())
        y = x
        if lo is not None:
            y = np.maximum(y, lo)
        if hi is not None:
            y = np.minimum(y, hi)
        return [np.asarray(y).astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if node.opset < 11:
            low.launch(unary_map_params, [In(0)], Out(0), fn=clip_attrs, params=self.bounds(node))
            return low
        has_lo = len(inputs) > 1 and inputs[1] is not None
        has_hi = len(inputs) > 2 and inputs[2] is not None
        if has_lo and has_hi:
            low.launch(ternary_map, [In(0), In(1), In(2)], Out(0), fn=_clip)
        elif has_lo:
            low.launch(binary_map, [In(0), In(1)], Out(0), fn=_clip_lo)
        elif has_hi:
            low.launch(binary_map, [In(0), In(2)], Out(0), fn=_clip_hi)
        else:
            low.launch(copy, [In(0)], Out(0))
        return low

    def cases(self) -> list[OpCase]:
        x = sample((3, 4), np.float32, -5, 5, 1)
        f = np.float32
        return [
            OpCase("both", [x, np.array(-1, f), np.array(2, f)]),
            OpCase("min_only", [x, np.array(0, f)]),
            OpCase("max_only", [x, None, np.array(0.5, f)]),
            OpCase("none", [x]),
            OpCase("min_gt_max", [x, np.array(2, f), np.array(1, f)]),
            OpCase("shape1_bounds", [x, np.array([-1], f), np.array([1], f)]),
            OpCase("empty", [np.zeros((0, 2), f), np.array(0, f), np.array(1, f)]),
            OpCase("scalar", [np.array(7, f), np.array(0, f), np.array(1, f)]),
            OpCase("f16", [sample((5,), np.float16, -3, 3, 2), np.array(-1, np.float16),
                           np.array(1, np.float16)]),
            OpCase("i8", [sample((6,), np.int8, -128, 127, 3), np.array(-5, np.int8),
                          np.array(9, np.int8)]),
            OpCase("u8_min", [sample((6,), np.uint8, 0, 255, 3), np.array(100, np.uint8)]),
            OpCase("i64", [sample((6,), np.int64, -1000, 1000, 3), None, np.array(3, np.int64)]),
            OpCase("attrs_opset6", [x], attrs={"min": -0.5, "max": 0.5}, opset=6),
            OpCase("attrs_default_opset6", [x], opset=6),
        ]


OPS: list[type[OpDef]] = [
    Sigmoid, Tanh, Softplus, Softsign, HardSwish, Mish, Swish, LeakyRelu, Elu, Selu, HardSigmoid,
    ThresholdedRelu, Shrink, Celu, Gelu, PRelu, Clip,
]
