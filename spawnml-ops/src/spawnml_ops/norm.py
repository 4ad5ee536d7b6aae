"""Normalisation: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, MeanVarianceNormalization, LRN and LpNormalization.

Statistics-based ops run two launches (``norm_kernels``): per-row mean and 1/std into a
float32 temporary, then one pass applying them; the rest are single gather kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from .batch_norm_training import (
    DEFAULT_MOMENTUM,
    lower_training,
    training_cases,
    training_outputs,
    training_reference,
)
from .common import normalize_axis, static_shape
from .conv_common import FLOATS, array_infos
from .norm_kernels import (
    PARAM_BROADCAST,
    PARAM_INDEXED,
    PARAM_NONE,
    apply_consts,
    batch_norm,
    lp_normalize,
    lrn,
    norm_apply,
    norm_stats,
    split_axes,
    stats_column,
    stats_consts,
)


def _rand(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _x(op: OpDef, node: Node, inputs, min_rank: int = 1) -> tuple[int, ...]:
    x = inputs[0] if inputs else None
    if x is None:
        raise op.fail(node, "input 0 (X) is required")
    if x.dtype not in FLOATS:
        raise op.fail(node, f"dtype {x.dtype} is not supported (expected a float type)")
    if x.shape is None or not x.is_static or len(x.shape) < min_rank:
        raise op.fail(node, f"input X needs a static shape of rank >= {min_rank}, got {x.shape}")
    return static_shape(x)


def _param(op: OpDef, node: Node, inputs, i: int, name: str, shape, required=True) -> bool:
    """Check optional/required parameter input ``i`` has ``shape``; whether it is present."""
    p = inputs[i] if len(inputs) > i else None
    if p is None:
        if required:
            raise op.fail(node, f"input {i} ({name}) is required")
        return False
    if p.shape is None or tuple(p.shape) != tuple(shape):
        raise op.fail(node, f"input {name} has shape {p.shape}, expected {tuple(shape)}")
    return True


def _eps(op: OpDef, node: Node, default: float = 1e-5) -> float:
    eps = float(op.attr(node, "epsilon", default))
    if not eps >= 0:
        raise op.fail(node, f"attribute 'epsilon' = {eps} must be >= 0")
    return eps


def lower_normalize(
    node: Node, x_shape: Sequence[int], reduced: Sequence[int], eps: float, dtype: DType,
    *, param_mode: int = PARAM_NONE, param_div: int = 1, param_mod: int = 1,
    scale: Ref | None = None, bias: Ref | None = None, center: bool = True,
    eps_outside_sqrt: bool = False, scale_normalized: bool = False, divide: bool = True,
) -> tuple[Lowering, Ref, int]:
    """Stats + apply launches for normalising over ``reduced`` axes; returns the lowering,
    the stats temporary and its row count (for Mean/InvStdDev outputs)."""
    kept, red = split_axes(node, x_shape, reduced)
    rows = int(np.prod([n for n, _ in kept])) if kept else 1
    low = Lowering()
    stats = low.temp(DType.float32, (rows, 2))
    low.launch(norm_stats, [In(0)], stats, **stats_consts(kept, red, eps, eps_outside_sqrt))
    dummy = scale if scale is not None else In(0)
    low.launch(norm_apply, [In(0), stats, dummy, bias if bias is not None else dummy], Out(0),
               **apply_consts(kept, param_mode=param_mode, param_div=param_div,
                              param_mod=param_mod, has_bias=bias is not None, center=center,
                              divide=divide, scale_normalized=scale_normalized))
    return low, stats, rows


def _standardize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple:
    """float64 (x - mean) / sqrt(var + eps), mean, inv_std."""
    t = x.astype(np.float64)
    mean = t.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(((t - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (t - mean) * inv, mean, inv


class BatchNormalization(OpDef):
    """Inference mode, and training mode from opset 14 (``batch_norm_training``); the
    training outputs of opsets 6-13 (saved mean/var) are unsupported."""

    op_type = "BatchNormalization"
    since_version = 6

    def training(self, node: Node) -> bool:
        """Whether the node normalises with batch statistics (training_mode=1)."""
        mode = self.attr(node, "training_mode", 0)
        if mode not in (0, 1):
            raise self.fail(node, f"attribute 'training_mode' must be 0 or 1, got {mode!r}")
        outputs = len([o for o in node.outputs if o])
        if node.opset >= 14 and mode:
            if outputs > 3:
                raise self.fail(node, f"has {outputs} outputs; training mode gives at most 3")
            return True
        if mode or outputs > 1:
            raise UnsupportedOpError(f"{node.describe()}: training outputs (mean/var) are "
                                     "supported from opset 14 (training_mode=1) only")
        return False

    def momentum(self, node: Node) -> float:
        momentum = self.attr(node, "momentum", DEFAULT_MOMENTUM)
        if isinstance(momentum, bool) or not isinstance(momentum, int | float):
            raise self.fail(node, f"attribute 'momentum' must be a float, got {momentum!r}")
        return float(momentum)

    def _check(self, node: Node, inputs) -> tuple[int, ...]:
        shape = _x(self, node, inputs, 2)
        self.training(node)
        # spatial=0 (opsets 7-8): one parameter per (channel, spatial position).
        spatial = node.opset >= 9 or int(self.attr(node, "spatial", 1))
        pshape = (shape[1],) if spatial else shape[1:]
        for i, name in enumerate(("scale", "B", "input_mean", "input_var"), start=1):
            _param(self, node, inputs, i, name, pshape)
        return pshape

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        if self.training(node):
            return training_outputs(inputs, len(node.outputs))
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, scale, b, mean, var = inputs[:5]
        eps = _eps(self, node)
        pshape = self._check(node, array_infos(inputs))
        if self.training(node):
            return training_reference(x, inputs[1:5], eps, self.momentum(node),
                                      len(node.outputs))
        shape = (1, *pshape, *([1] * (x.ndim - 1 - len(pshape))))
        p = [np.asarray(a, np.float64).reshape(shape) for a in (scale, b, mean, var)]
        y = (x.astype(np.float64) - p[2]) / np.sqrt(p[3] + eps) * p[0] + p[1]
        return [y.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        pshape = self._check(node, inputs)
        shape = static_shape(inputs[0])
        if self.training(node):
            return lower_training(node, shape, _eps(self, node), self.momentum(node),
                                  len(node.outputs))
        inner = int(np.prod(shape[1 + len(pshape):]))
        low = Lowering()
        low.launch(batch_norm, [In(0), In(1), In(2), In(3), In(4)], Out(0), param_div=inner,
                   param_mod=int(np.prod(pshape)), eps=_eps(self, node))
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(0, 2, 3, 4, 5)
        p = [_rand(1, 3), _rand(2, 3), _rand(3, 3), np.abs(_rand(4, 3)) + 0.1]
        x2 = x.copy()
        x2[0, 0, 0, :2] = [np.nan, np.inf]
        return [
            OpCase("nchw", [x, *p], {"epsilon": 1e-3}),
            OpCase("nc", [_rand(5, 4, 3), *p]),
            OpCase("ncd_size1", [_rand(6, 1, 3, 1), *p]),
            OpCase("nan_inf", [x2, *p]),
            OpCase("spatial0", [x[:, :, :1, :2].copy(), *(np.tile(a[:, None, None], (1, 1, 2))
                                                         for a in p)],
                   {"spatial": 0}, opset=7),
            *training_cases(),
        ]


class InstanceNormalization(OpDef):
    op_type = "InstanceNormalization"
    since_version = 1

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        shape = _x(self, node, inputs, 3)
        _param(self, node, inputs, 1, "scale", (shape[1],))
        _param(self, node, inputs, 2, "B", (shape[1],))
        _eps(self, node)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, s, b = inputs
        y, _, _ = _standardize(x, tuple(range(2, x.ndim)), _eps(self, node))
        shape = (1, -1, *([1] * (x.ndim - 2)))
        return [(y * s.reshape(shape) + b.reshape(shape)).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape = static_shape(inputs[0])
        low, _, _ = lower_normalize(
            node, shape, range(2, len(shape)), _eps(self, node), inputs[0].dtype,
            param_mode=PARAM_INDEXED, param_div=int(np.prod(shape[2:])), param_mod=shape[1],
            scale=In(1), bias=In(2))
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("2d", [_rand(0, 2, 3, 4, 5), _rand(1, 3), _rand(2, 3)], {"epsilon": 1e-2}),
            OpCase("1d", [_rand(3, 1, 2, 7), _rand(4, 2), _rand(5, 2)]),
            OpCase("size1_spatial", [_rand(6, 2, 2, 1, 1), _rand(7, 2), _rand(8, 2)]),
        ]


class LayerNormalization(OpDef):
    """Normalise over axes [axis, rank); optional Mean and InvStdDev outputs (stash type)."""

    op_type = "LayerNormalization"
    since_version = 17

    def _check(self, node: Node, inputs) -> tuple[tuple[int, ...], int]:
        shape = _x(self, node, inputs, 1)
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), len(shape))
        if int(self.attr(node, "stash_type", 1)) != 1:
            raise UnsupportedOpError(f"{node.describe()}: attribute 'stash_type' = "
                                     f"{self.attr(node, 'stash_type')} (only 1, float32)")
        for i, name in ((1, "Scale"), (2, "B")):
            p = inputs[i] if len(inputs) > i else None
            if p is None:
                if i == 1:
                    raise self.fail(node, "input 1 (Scale) is required")
                continue
            if p.shape is None or tuple(np.broadcast_shapes(tuple(p.shape), shape[axis:])) \
                    != shape[axis:]:
                raise self.fail(node, f"input {name} {p.shape} does not broadcast to the "
                                      f"normalised shape {shape[axis:]}")
        _eps(self, node)
        return shape, axis

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        shape, axis = self._check(node, inputs)
        stat = TensorInfo(DType.float32, (*shape[:axis], *([1] * (len(shape) - axis))))
        return [inputs[0], stat, stat][: max(1, len(node.outputs))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, scale = inputs[0], inputs[1]
        b = inputs[2] if len(inputs) > 2 else None
        _, axis = self._check(node, array_infos(inputs))
        # stash_type 1: statistics in float32, the normalised value cast to X's type.
        y, mean, inv = _standardize(x.astype(np.float32), tuple(range(axis, x.ndim)),
                                    _eps(self, node))
        y = y.astype(x.dtype).astype(np.float64) * scale
        if b is not None:
            y = y + b
        return [y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)][
            : max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape, axis = self._check(node, inputs)
        has_b = len(inputs) > 2 and inputs[2] is not None
        low, stats, _ = lower_normalize(
            node, shape, range(axis, len(shape)), _eps(self, node), inputs[0].dtype,
            param_mode=PARAM_BROADCAST, scale=In(1), bias=In(2) if has_b else None,
            scale_normalized=inputs[0].dtype != DType.float32)
        for i in range(1, len(outputs)):
            low.launch(stats_column, [stats], Out(i), column=i - 1)
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(0, 2, 3, 4)
        nan = x.copy()
        nan[0, 1, 2] = np.nan
        return [
            OpCase("last_axis", [x, _rand(1, 4), _rand(2, 4)]),
            OpCase("axis1_outputs", [x, _rand(3, 3, 4), _rand(4, 4)], {"axis": 1}, n_outputs=3),
            OpCase("axis0_no_bias", [x, _rand(5, 2, 3, 4)], {"axis": 0, "epsilon": 0.1},
                   n_outputs=2),
            OpCase("scale_broadcast", [x, _rand(6, 1, 4)], {"axis": -2}),
            OpCase("size1", [_rand(7, 1, 1), _rand(8, 1), _rand(9, 1)], n_outputs=3),
            OpCase("nan_row", [nan, _rand(10, 4), _rand(11, 4)]),
            OpCase("f16", [x.astype(np.float16), _rand(12, 4).astype(np.float16)],
                   rtol=5e-3, atol=5e-3),
        ]


class GroupNormalization(OpDef):
    """Scale and bias per group (opset 18) or per channel (opset 21)."""

    op_type = "GroupNormalization"
    since_version = 18

    def _check(self, node: Node, inputs) -> tuple[tuple[int, ...], int, int]:
        shape = _x(self, node, inputs, 2)
        groups = int(self.attr(node, "num_groups", required=True))
        if groups < 1 or shape[1] % groups:
            raise self.fail(node, f"attribute 'num_groups' = {groups} must divide the "
                                  f"{shape[1]} channels")
        per = shape[1] if node.opset >= 21 else groups
        _param(self, node, inputs, 1, "scale", (per,))
        _param(self, node, inputs, 2, "bias", (per,))
        _eps(self, node)
        return shape, groups, per

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, s, b = inputs
        shape, groups, per = self._check(node, array_infos(inputs))
        g = x.reshape(shape[0], groups, -1)
        y, _, _ = _standardize(g, (2,), _eps(self, node))
        y = y.reshape(shape[0], groups, shape[1] // groups, -1)
        pshape = (1, groups, 1, 1) if per == groups else (1, groups, shape[1] // groups, 1)
        y = y * s.reshape(pshape) + b.reshape(pshape)
        return [y.reshape(shape).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape, groups, per = self._check(node, inputs)
        n, c = shape[:2]
        # Normalise a (N, G, C/G * spatial) view: one row per (n, group).
        view = (n, groups, int(np.prod(shape[1:])) // groups)
        spatial = int(np.prod(shape[2:]))
        div = spatial * (c // groups) if per == groups else spatial
        low, _, _ = lower_normalize(
            node, view, (2,), _eps(self, node), inputs[0].dtype, param_mode=PARAM_INDEXED,
            param_div=div, param_mod=per, scale=In(1), bias=In(2))
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(0, 2, 4, 3, 2)
        return [
            OpCase("per_channel_21", [x, _rand(1, 4), _rand(2, 4)], {"num_groups": 2}, opset=21),
            OpCase("per_group_18", [x, _rand(3, 2), _rand(4, 2)], {"num_groups": 2,
                                                                   "epsilon": 1e-2}, opset=18),
            OpCase("one_group", [x, _rand(5, 4), _rand(6, 4)], {"num_groups": 1}, opset=21),
            OpCase("instance_like", [_rand(7, 1, 3, 5), _rand(8, 3), _rand(9, 3)],
                   {"num_groups": 3}, opset=21),
        ]


class MeanVarianceNormalization(OpDef):
    """(x - mean) / (std + 1e-9) over ``axes`` (default N, H, W)."""

    op_type = "MeanVarianceNormalization"
    since_version = 1

    def _axes(self, node: Node, rank: int) -> tuple[tuple[int, ...], bool]:
        if node.opset < 9:
            across = int(self.attr(node, "across_channels", 0))
            axes = (0, 1, 2, 3) if across else (0, 2, 3)
            return axes, bool(int(self.attr(node, "normalize_variance", 1)))
        axes = tuple(normalize_axis(node, int(a), rank) for a in self.attr(node, "axes", (0, 2, 3)))
        if len(set(axes)) != len(axes):
            raise self.fail(node, f"attribute 'axes' = {list(axes)} repeats an axis")
        return axes, True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        shape = _x(self, node, inputs, 1)
        self._axes(node, len(shape))
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        axes, scale = self._axes(node, x.ndim)
        t = x.astype(np.float64)
        d = t - t.mean(axis=axes, keepdims=True)
        if scale:
            d = d / (np.sqrt((d * d).mean(axis=axes, keepdims=True)) + 1e-9)
        return [d.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape = static_shape(inputs[0])
        axes, scale = self._axes(node, len(shape))
        low, _, _ = lower_normalize(node, shape, axes, 1e-9, inputs[0].dtype,
                                    eps_outside_sqrt=True, divide=scale)
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("default_axes", [_rand(0, 2, 3, 4, 5)]),
            OpCase("axes_c_w", [_rand(1, 2, 3, 4, 5)], {"axes": (1, 3)}),
            OpCase("last_axis", [_rand(2, 3, 6)], {"axes": (-1,)}),
            OpCase("opset1_across_no_variance", [_rand(3, 2, 3, 2, 2)],
                   {"across_channels": 1, "normalize_variance": 0}, opset=1),
        ]


class LRN(OpDef):
    op_type = "LRN"
    since_version = 1

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        _x(self, node, inputs, 3)
        size = int(self.attr(node, "size", required=True))
        if size < 1:
            raise self.fail(node, f"attribute 'size' = {size} must be >= 1")
        return [inputs[0]]

    def _params(self, node: Node) -> tuple[int, float, float, float]:
        return (int(self.attr(node, "size")), float(self.attr(node, "alpha", 1e-4)),
                float(self.attr(node, "beta", 0.75)), float(self.attr(node, "bias", 1.0)))

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        size, alpha, beta, bias = self._params(node)
        t = x.astype(np.float64)
        sq = np.zeros_like(t)
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        for c in range(x.shape[1]):
            sq[:, c] = (t[:, max(0, c - lo): min(x.shape[1], c + hi + 1)] ** 2).sum(axis=1)
        return [(t / (bias + alpha / size * sq) ** beta).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        size, alpha, beta, bias = self._params(node)
        low = Lowering()
        low.launch(lrn, [In(0)], Out(0), size=size, alpha=alpha, beta=beta, bias=bias)
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("size3", [_rand(0, 4, 4, 3, 3)], {"size": 3, "alpha": 0.01}, rtol=1e-4),
            OpCase("size4_even", [_rand(1, 5, 5, 2, 2)], {"size": 4, "beta": 0.5, "bias": 2.0},
                   rtol=1e-4),
            OpCase("size5_few_batches", [_rand(3, 1, 7, 2, 2)], {"size": 5, "alpha": 0.1}),
            OpCase("size1_c1", [_rand(2, 1, 1, 2, 2)], {"size": 1}),
        ]


class LpNormalization(OpDef):
    op_type = "LpNormalization"
    since_version = 1

    def _check(self, node: Node, inputs) -> tuple[int, int]:
        shape = _x(self, node, inputs, 1)
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), len(shape))
        p = int(self.attr(node, "p", 2))
        if p not in (1, 2):
            raise self.fail(node, f"attribute 'p' = {p} must be 1 or 2")
        return axis, p

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        axis, p = self._check(node, array_infos([x]))
        t = x.astype(np.float64)
        norm = np.abs(t).sum(axis=axis, keepdims=True) if p == 1 else \
            np.sqrt((t * t).sum(axis=axis, keepdims=True))
        return [(t / np.where(norm == 0, 1.0, norm)).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        axis, p = self._check(node, inputs)
        low = Lowering()
        low.launch(lp_normalize, [In(0)], Out(0), axis=axis, p=p)
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(0, 3, 4)
        x[1] = 0.0  # a zero row: 0 / 0
        return [
            OpCase("l2_last", [x]),
            OpCase("l1_axis0", [x], {"p": 1, "axis": 0}),
            OpCase("l2_3d_axis1", [_rand(1, 2, 3, 2)], {"axis": 1}),
        ]


OPS: list[type[OpDef]] = [BatchNormalization, InstanceNormalization, LayerNormalization,
                          GroupNormalization, MeanVarianceNormalization, LRN, LpNormalization]
