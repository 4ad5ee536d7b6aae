"""Normalisation kernels for the cpu backend: InstanceNormalization and LayerNormalization
as a few whole-array numpy passes (the portable kernels recompute the statistics for every
output element)."""

from __future__ import annotations

import numpy as np

from spawnml.op import kernel_attributes

from .fast_kernels import Arrays, Compute, CpuKernel


def _normalise(x: np.ndarray, axes: tuple[int, ...], eps: float, y: np.ndarray) -> None:
    """``y = (x - mean) / sqrt(var + eps)`` over ``axes`` (population variance)."""
    np.subtract(x, x.mean(axis=axes, keepdims=True), out=y)
    var = np.mean(np.square(y), axis=axes, keepdims=True)
    y *= 1.0 / np.sqrt(var + np.float32(eps))


class InstanceNormalization(CpuKernel):
    op_type = "InstanceNormalization"
    since_version = 6  # 1-5: consumed_inputs
    attributes = kernel_attributes("epsilon")

    def accepts(self, node, inputs, outputs) -> bool:
        return len(inputs[0].shape) >= 3

    def build(self, node, inputs, outputs, values) -> Compute:
        rank = len(inputs[0].shape)
        eps = float(node.attrs.get("epsilon", 1e-5))
        axes = tuple(range(2, rank))
        bcast = (-1,) + (1,) * (rank - 2)

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            y = out[0]
            _normalise(a[0], axes, eps, y)
            y *= a[1].reshape(bcast)
            y += a[2].reshape(bcast)

        return compute


class LayerNormalization(CpuKernel):
    """Opset 17 LayerNormalization, Y only (Mean/InvStdDev outputs go portable)."""

    op_type = "LayerNormalization"
    since_version = 17
    attributes = kernel_attributes("axis", "epsilon", stash_type=(1,))

    def accepts(self, node, inputs, outputs) -> bool:
        single = len([o for o in node.outputs if o]) == 1
        return single and int(node.attrs.get("stash_type", 1)) == 1

    def build(self, node, inputs, outputs, values) -> Compute:
        rank = len(inputs[0].shape)
        axis = int(node.attrs.get("axis", -1)) % rank
        eps = float(node.attrs.get("epsilon", 1e-5))
        axes = tuple(range(axis, rank))

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            y = out[0]
            _normalise(a[0], axes, eps, y)
            y *= a[1]
            if len(a) > 2 and a[2] is not None:
                y += a[2]

        return compute


KERNELS: list[type[CpuKernel]] = [InstanceNormalization, LayerNormalization]
