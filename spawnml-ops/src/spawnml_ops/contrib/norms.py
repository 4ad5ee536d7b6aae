"""onnxruntime's normalisation fusions: SimplifiedLayerNormalization (RMSNorm, registered by
onnxruntime in the ai.onnx domain), SkipSimplifiedLayerNormalization and
SkipLayerNormalization (com.microsoft).

They reuse the normalisation family's launches: a statistics pass (``rms_stats`` or
``norm_stats``) into a (rows, 2) float32 temporary and the ``norm_apply`` pass; the skip
forms first add input + skip (+ bias) into a float32 temporary, as onnxruntime sums in
float32, and write the rounded sum as the optional ``input_skip_bias_sum`` output.
"""


from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, kernel
from spawnml.kernel.lib import broadcast_offset
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from ..attention_ops import rms_stats
from ..cast import cast_map
from ..common import normalize_axis
from ..norm_kernels import (
    PARAM_BROADCAST,
    apply_consts,
    norm_apply,
    norm_stats,
    split_axes,
    stats_column,
    stats_consts,
)
from .common import (
    DOMAIN,
    FLOATS,
    broadcasts_to,
    float_input,
    int_attr,
    optional,
    rand,
    same_type,
)


@kernel
def skip_sum(x: Tensor, skip: Tensor, bias: Tensor, out: Output, has_bias: bool):
    """out = x + skip (+ bias), skip and bias broadcast (numpy rules), summed in float32."""
    v = cast(x.flat[out.flat], f32) + cast(skip.flat[broadcast_offset(skip, out)], f32)
    if has_bias:
        v = v + cast(bias.flat[broadcast_offset(bias, out)], f32)
    return cast(v, out.dtype)


def _wanted(node: Node, i: int) -> bool:
    return i < len(node.outputs) and node.outputs[i] != ""


def _stats_shape(shape: Sequence[int], axis: int) -> tuple[int, ...]:
    return (*shape[:axis], *([1] * (len(shape) - axis)))


def normalize_launches(low: Lowering, node: Node, x: Ref, shape: tuple[int, ...], axis: int,
                       gamma: Ref, beta: Ref | None, eps: float, rms: bool,
                       y: Ref) -> Ref:
    """Statistics over axes [axis, rank) of ``x`` and the apply pass into ``y``; returns the
    (rows, 2) statistics temporary (column 0 the mean, 1 the inverse deviation)."""
    kept, red = split_axes(node, shape, range(axis, len(shape)))
    rows = int(np.prod([n for n, _ in kept])) if kept else 1
    stats = low.temp(DType.float32, (rows, 2))
    low.launch(rms_stats if rms else norm_stats, [x], stats, **stats_consts(kept, red, eps))
    low.launch(norm_apply, [x, stats, gamma, beta or gamma], y,
               **apply_consts(kept, param_mode=PARAM_BROADCAST, param_div=1, param_mod=1,
                              has_bias=beta is not None, center=not rms, divide=True,
                              scale_normalized=False))
    return stats


def normalize_reference(s: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, axis: int,
                        eps: float, rms: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(normalised, mean, inverse deviation) of float32 ``s`` over axes [axis, rank)."""
    axes = tuple(range(axis, s.ndim))
    mean = np.zeros_like(s[..., :1]) if rms else np.mean(s, axis=axes, keepdims=True)
    c = s if rms else s - mean
    inv = 1.0 / np.sqrt(np.mean(c * c, axis=axes, keepdims=True) + eps)
    y = c * inv * gamma.astype(np.float32)
    if beta is not None:
        y = y + beta.astype(np.float32)
    return y, mean, inv


class SimplifiedLayerNormalization(OpDef):
    """RMSNorm as onnxruntime exports it: x / sqrt(mean(x^2) + epsilon) * scale over axes
    [axis, rank); the optional second output is the inverse deviation (float32)."""

    op_type = "SimplifiedLayerNormalization"
    since_version = 1
    dtypes = FLOATS

    def _check(self, node: Node, inputs) -> tuple[tuple[int, ...], int]:
        shape = float_input(self, node, inputs, 0, "X")
        scale = float_input(self, node, inputs, 1, "scale")
        axis = normalize_axis(node, int_attr(self, node, "axis", -1), len(shape))
        int_attr(self, node, "stash_type", 1, choices=(1,))
        if not broadcasts_to(scale, shape[axis:]):
            raise self.fail(node, f"scale {scale} does not broadcast to the normalised axes "
                                  f"{shape[axis:]}")
        return shape, axis

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        shape, axis = self._check(node, inputs)
        outs = [inputs[0], TensorInfo(DType.float32, _stats_shape(shape, axis))]
        return outs[: max(1, len(node.outputs))]  # type: ignore[return-value]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        _, axis = self._check(node, array_infos(inputs))
        x = inputs[0]
        eps = float(self.attr(node, "epsilon", 1e-5))
        y, _, inv = normalize_reference(x.astype(np.float32), inputs[1], None, axis, eps, True)
        return [y.astype(x.dtype), inv.astype(np.float32)][: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape, axis = self._check(node, inputs)
        low = Lowering()
        stats = normalize_launches(low, node, In(0), shape, axis, In(1), None,
                                   float(self.attr(node, "epsilon", 1e-5)), True, Out(0))
        if _wanted(node, 1):
            low.launch(stats_column, [stats], Out(1), column=1)
        return low

    def cases(self) -> list[OpCase]:
        x = rand(0, 2, 3, 8)
        return [
            OpCase("last_axis", [x, rand(1, 8)], n_outputs=2, rtol=1e-5, atol=1e-5),
            OpCase("axis1", [x, rand(2, 3, 8)], {"axis": 1, "epsilon": 0.1}, rtol=1e-5,
                   atol=1e-5),
            OpCase("f16", [x.astype(np.float16), rand(3, 8, dtype=np.float16)], rtol=2e-3,
                   atol=2e-3),
        ]


class _SkipNorm(OpDef):
    """input + skip (+ bias), normalised over the last axis; outputs (output, mean,
    inv_std_var, input_skip_bias_sum)."""

    domain = DOMAIN
    since_version = 1
    dtypes = FLOATS
    rms = False
    bias_index = 4  # beta is input 3 of SkipLayerNormalization

    def _check(self, node: Node, inputs) -> tuple[int, ...]:
        shape = float_input(self, node, inputs, 0, "input")
        if len(shape) not in (2, 3):
            raise self.fail(node, f"input must be 2-D or 3-D, got {shape}")
        skip = float_input(self, node, inputs, 1, "skip")
        hidden = shape[-1]
        if skip[-1] != hidden or not broadcasts_to(skip, shape):
            raise self.fail(node, f"skip {skip} does not broadcast to input {shape}")
        names = [(2, "gamma"), (self.bias_index, "bias")]
        if not self.rms:
            names.append((3, "beta"))
        for i, name in names:
            if i == 2 or optional(inputs, i) is not None:
                if float_input(self, node, inputs, i, name) != (hidden,):
                    raise self.fail(node, f"{name} must have shape ({hidden},), got "
                                          f"{inputs[i].shape}")  # type: ignore[union-attr]
        same_type(self, node, inputs, [(1, "skip"), *names])
        return shape

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        shape = self._check(node, inputs)
        stats = TensorInfo(DType.float32, _stats_shape(shape, len(shape) - 1))
        return [inputs[0], stats, stats, inputs[0]][: max(1, len(node.outputs))]  # type: ignore[list-item]

    def _beta(self, inputs) -> int | None:
        return None if self.rms or optional(inputs, 3) is None else 3

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        shape = self._check(node, array_infos(inputs))
        x, skip, gamma = inputs[:3]
        bias = inputs[self.bias_index] if len(inputs) > self.bias_index else None
        beta_i = self._beta(array_infos(inputs))
        s = x.astype(np.float32) + skip.astype(np.float32)
        if bias is not None:
            s = s + bias.astype(np.float32)
        eps = float(self.attr(node, "epsilon", 1e-5 if self.rms else 1e-12))
        y, mean, inv = normalize_reference(s, gamma, None if beta_i is None else inputs[beta_i],
                                           len(shape) - 1, eps, self.rms)
        outs = [y.astype(x.dtype), mean, inv, s.astype(x.dtype)]
        return outs[: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape = self._check(node, inputs)
        has_bias = optional(inputs, self.bias_index) is not None
        low = Lowering()
        total = low.temp(DType.float32, shape)
        bias = In(self.bias_index) if has_bias else In(0)
        low.launch(skip_sum, [In(0), In(1), bias], total, has_bias=has_bias)
        if _wanted(node, 3):
            low.launch(cast_map, [total], Out(3))
        beta_i = self._beta(inputs)
        eps = float(self.attr(node, "epsilon", 1e-5 if self.rms else 1e-12))
        stats = normalize_launches(low, node, total, shape, len(shape) - 1, In(2),
                                   None if beta_i is None else In(beta_i), eps, self.rms, Out(0))
        for i in (1, 2):
            if _wanted(node, i):
                low.launch(stats_column, [stats], Out(i), column=i - 1)
        return low

    def cases(self) -> list[OpCase]:
        x, skip, g, b = rand(0, 2, 3, 8), rand(1, 2, 3, 8), rand(2, 8), rand(3, 8)
        extra = [None] if not self.rms else []
        tol = dict(rtol=1e-4, atol=1e-5)
        f16 = [a.astype(np.float16) for a in (x, skip[0], g)]
        return [
            OpCase("plain", [x, skip, g], **tol),
            OpCase("bias_all_outputs", [x, skip, g, *extra, b], n_outputs=4, **tol),
            OpCase("skip_2d_2d_input", [x[0], skip[0], g, *extra, b], {"epsilon": 0.01},
                   n_outputs=4, **tol),
            OpCase("skip_broadcast_f16", f16, rtol=2e-3, atol=2e-3),
        ]


class SkipLayerNormalization(_SkipNorm):
    """LayerNorm(input + skip + bias) * gamma + beta (epsilon 1e-12 by default)."""

    op_type = "SkipLayerNormalization"

    def cases(self) -> list[OpCase]:
        x, skip, g, b = rand(0, 2, 3, 8), rand(1, 1, 3, 8), rand(2, 8), rand(3, 8)
        return [*super().cases(),
                OpCase("beta_bias", [x, skip, g, b, rand(4, 8)], n_outputs=4, rtol=1e-4,
                       atol=1e-5)]


class SkipSimplifiedLayerNormalization(_SkipNorm):
    """RMSNorm(input + skip + bias) * gamma; the mean output is 0 (as onnxruntime)."""

    op_type = "SkipSimplifiedLayerNormalization"
    rms = True
    bias_index = 3


OPS: list[type[OpDef]] = [SimplifiedLayerNormalization, SkipLayerNormalization,
                          SkipSimplifiedLayerNormalization]
