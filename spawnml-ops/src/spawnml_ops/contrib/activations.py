"""com.microsoft activations: BiasGelu (erf GELU of x + bias), FastGelu (tanh GELU, optional
bias) and QuickGelu (x * sigmoid(alpha * x)). One elementwise launch each, reusing the GELU
helpers of the ai.onnx Gelu op."""

from __future__ import annotations

import math

import numpy as np

from spawnml.kernel import cast, cast_like, f32, helper
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from ..activations import _gelu_erf, _gelu_tanh, _swish
from ..common import binary_map, broadcast_shapes, unary_map, unary_map_params
from ..unary_base import erf_np
from .common import DOMAIN, FLOATS, float_attr, float_input, optional, rand


@helper
def _bias_gelu_erf(x, b):
    """erf GELU of x + b (the sum rounded to the input type first, as onnxruntime)."""
    return _gelu_erf(cast_like(cast(x, f32) + cast(b, f32), x))


@helper
def _bias_gelu_tanh(x, b):
    """tanh GELU of x + b."""
    return _gelu_tanh(cast_like(cast(x, f32) + cast(b, f32), x))


def _gelu(x: np.ndarray, tanh: bool) -> np.ndarray:
    f = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if tanh:
            return 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f**3)))
        return 0.5 * f * (1 + erf_np(f / math.sqrt(2)))


class _BiasActivation(OpDef):
    """x (+ a bias over the last axis) through an activation."""

    domain = DOMAIN
    since_version = 1
    dtypes = FLOATS
    bias_required = False
    tanh = False

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = float_input(self, node, inputs, 0, "X")
        if self.bias_required or optional(inputs, 1) is not None:
            b = float_input(self, node, inputs, 1, "bias")
            if inputs[1].dtype != inputs[0].dtype:  # type: ignore[union-attr]
                raise self.fail(node, "bias must have the input's dtype")
            if len(b) != 1 or not x or b[0] != x[-1]:
                raise self.fail(node, f"bias {b} must be 1-D of the input's last dimension "
                                      f"({x[-1] if x else None})")
            broadcast_shapes(node, x, b)
        return [inputs[0]]  # type: ignore[list-item]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        b = inputs[1] if len(inputs) > 1 else None
        s = x if b is None else (x.astype(np.float32) + b.astype(np.float32)).astype(x.dtype)
        return [_gelu(s, self.tanh).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        if optional(inputs, 1) is None:
            low.launch(unary_map, [In(0)], Out(0), fn=_gelu_tanh if self.tanh else _gelu_erf)
        else:
            low.launch(binary_map, [In(0), In(1)], Out(0),
                       fn=_bias_gelu_tanh if self.tanh else _bias_gelu_erf)
        return low

    def cases(self) -> list[OpCase]:
        x, b = rand(0, 2, 3, 8) * 2, rand(1, 8)
        tol = dict(rtol=1e-5, atol=1e-5)
        out = [OpCase("bias", [x, b], **tol),
               OpCase("f16", [x.astype(np.float16), b.astype(np.float16)], rtol=2e-3,
                      atol=2e-3)]
        if not self.bias_required:
            out.append(OpCase("no_bias", [x], **tol))
        return out


class BiasGelu(_BiasActivation):
    """GELU (erf form) of A + B, B a bias over the last axis."""

    op_type = "BiasGelu"
    bias_required = True


class FastGelu(_BiasActivation):
    """The tanh approximation of GELU of X (+ an optional bias over the last axis)."""

    op_type = "FastGelu"
    tanh = True


class QuickGelu(OpDef):
    """x * sigmoid(alpha * x), alpha 1.702 by default."""

    domain = DOMAIN
    op_type = "QuickGelu"
    since_version = 1
    dtypes = FLOATS

    def _alpha(self, node: Node) -> float:
        return float_attr(self, node, "alpha", 1.702)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        float_input(self, node, inputs, 0, "X")
        self._alpha(node)
        return [inputs[0]]  # type: ignore[list-item]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        f = x.astype(np.float64)
        with np.errstate(all="ignore"):
            y = f / (1.0 + np.exp(-self._alpha(node) * f))
        return [y.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(unary_map_params, [In(0)], Out(0), fn=_swish, params=(self._alpha(node),))
        return low

    def cases(self) -> list[OpCase]:
        x = rand(0, 3, 7) * 3
        return [OpCase("default", [x], rtol=1e-5, atol=1e-5),
                OpCase("alpha", [x], {"alpha": -0.5}, rtol=1e-5, atol=1e-5),
                OpCase("f16", [x.astype(np.float16)], rtol=2e-3, atol=2e-3)]


OPS: list[type[OpDef]] = [BiasGelu, FastGelu, QuickGelu]
