"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both view the scores as [N, C, D] (D = product of the trailing dims) and the targets as
[N, D]. Per element ``loss = -x[n, t, d] * w`` with ``w = weight[t]`` (1 without weights)
and ``w = 0`` where ``t == ignore_index``; ``mean`` divides the summed loss by the summed
``w`` (the onnx definition, which is the plain mean without weights or ignored targets).
SoftmaxCrossEntropyLoss first computes log_softmax over C with the Softmax kernels.
"""


from __future__ import annotations

import math

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from .axes import prod, static
from .softmax import LOG_SOFTMAX, row_stats, softmax_apply

FLOATS = (DType.float32, DType.float16, DType.float64)
INDEX = (DType.int32, DType.int64)
REDUCTIONS = ("none", "sum", "mean")


@helper
def target_weight(target, weight, i, c, ignore, has_ignore, has_weight):
    """The weight of flat target ``i`` (0 where it is ignored)."""
    t = cast(target.flat[i], i32)
    w = 1.0
    if has_weight:
        w = cast(weight.flat[min(max(t, 0), c - 1)], f32)
    if has_ignore:
        w = 0.0 if t == ignore else w
    return w


@helper
def element_loss(logp, target, weight, i, c, d, ignore, has_ignore, has_weight):
    """-logp[n, t, d] * w for flat target position ``i`` = n * d + j (f32)."""
    t = min(max(cast(target.flat[i], i32), 0), c - 1)
    w = target_weight(target, weight, i, c, ignore, has_ignore, has_weight)
    v = cast(logp.flat[(i // d) * (c * d) + t * d + i % d], f32)
    return 0.0 if w == 0.0 else -v * w


@kernel
def nll_none(logp: Tensor, target: Tensor, weight: Tensor, out: Output, c: int, d: int,
             ignore: int, has_ignore: bool, has_weight: bool):
    """reduction='none': one loss per target element."""
    return cast(element_loss(logp, target, weight, out.flat, c, d, ignore, has_ignore,
                             has_weight), out.dtype)


@kernel
def nll_partial(logp: Tensor, target: Tensor, weight: Tensor, out: Output, c: int, d: int,
                ignore: int, has_ignore: bool, has_weight: bool, block: int):
    """reduction='sum'/'mean', first level: out (blocks, 2) holds each block of ``block``
    targets' summed loss (column 0) and summed weight (column 1)."""
    first = out.index[0] * block
    total = 0.0
    for k in range(block):
        i = first + k
        if i < target.size:
            if out.index[1] == 0:
                total = total + element_loss(logp, target, weight, i, c, d, ignore, has_ignore,
                                             has_weight)
            else:
                total = total + target_weight(target, weight, i, c, ignore, has_ignore,
                                              has_weight)
    return total


@kernel
def nll_finish(partial: Tensor, out: Output, mean: bool):
    """The scalar loss: the blocks' sums added (over the summed weight for 'mean')."""
    total = 0.0
    wsum = 0.0
    for b in range(partial.shape[0]):
        total = total + partial[b, 0]
        wsum = wsum + partial[b, 1]
    if mean:
        total = total / wsum
    return cast(total, out.dtype)


def reduction_blocks(size: int) -> tuple[int, int]:
    """(block length, block count) of a two-level sum of ``size`` terms: about sqrt(size)
    each, so float32 rounding grows with 2·sqrt(size) additions, not size."""
    block = max(1, math.isqrt(max(size - 1, 0)) + 1)
    return block, max(1, -(-size // block))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    t = x.astype(np.float64)
    t = t - t.max(axis=1, keepdims=True)
    return t - np.log(np.exp(t).sum(axis=1, keepdims=True))


class _LossBase(OpDef):
    softmax: bool = False
    dtypes = (DType.float32,)

    def _check(self, node: Node, inputs) -> tuple[int, int, int, str, bool]:
        """(N, C, D, reduction, has_weight) after validating shapes and attributes."""
        x = inputs[0] if inputs else None
        t = inputs[1] if len(inputs) > 1 else None
        if x is None or t is None:
            raise self.fail(node, "inputs 0 (scores) and 1 (labels) are required")
        if x.dtype not in FLOATS:
            raise self.fail(node, f"scores dtype {x.dtype} is not a float type")
        if t.dtype not in INDEX:
            raise self.fail(node, f"labels dtype {t.dtype} must be int32 or int64")
        if x.shape is None or len(x.shape) < 2 or not x.is_static or not t.is_static:
            raise self.fail(node, f"scores need a static shape of rank >= 2, got {x.shape}")
        shape = static(x)
        tshape = static(t)
        if tshape != (shape[0], *shape[2:]):
            raise self.fail(node, f"labels shape {tshape} does not match scores {shape} "
                                  "(expected (N, d1, ...))")
        w = inputs[2] if len(inputs) > 2 else None
        if w is not None and (w.shape is None or tuple(w.shape) != (shape[1],)):
            raise self.fail(node, f"weights shape {w.shape} must be ({shape[1]},)")
        reduction = str(self.attr(node, "reduction", "mean"))
        if isinstance(self.attr(node, "reduction"), bytes):
            reduction = self.attr(node, "reduction").decode()
        if reduction not in REDUCTIONS:
            raise self.fail(node, f"attribute 'reduction' = {reduction!r} must be one of "
                                  f"{REDUCTIONS}")
        return shape[0], shape[1], prod(shape[2:]), reduction, w is not None

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        _, _, _, reduction, _ = self._check(node, inputs)
        x, t = inputs[0], inputs[1]
        loss = TensorInfo(x.dtype, tuple(t.shape) if reduction == "none" else ())
        if self.softmax and len(node.outputs) > 1:
            return [loss, x]
        return [loss]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        x, target = np.asarray(inputs[0]), np.asarray(inputs[1])
        weight = inputs[2] if len(inputs) > 2 else None
        n, c, d, reduction, _ = self._check(node, array_infos(inputs))
        logp = _log_softmax(x) if self.softmax else x.astype(np.float64)
        t = target.reshape(n, d).astype(np.int64)
        ignore = self.attr(node, "ignore_index")
        w = np.ones(t.shape) if weight is None else \
            np.asarray(weight, np.float64)[np.clip(t, 0, c - 1)]
        if ignore is not None:
            w = np.where(t == int(ignore), 0.0, w)
        picked = np.take_along_axis(logp.reshape(n, c, d), np.clip(t, 0, c - 1)[:, None], 1)
        loss = np.where(w == 0, 0.0, -picked[:, 0] * w)
        if reduction == "none":
            out = loss.reshape(target.shape)
        elif reduction == "sum":
            out = np.array(loss.sum())
        else:
            with np.errstate(all="ignore"):
                out = np.array(loss.sum() / w.sum())
        outs = [out.astype(x.dtype)]
        if self.softmax and len(node.outputs) > 1:
            outs.append(logp.astype(x.dtype))
        return outs

    def lower(self, node, inputs, outputs, values) -> Lowering:
        n, c, d, reduction, has_weight = self._check(node, inputs)
        ignore = self.attr(node, "ignore_index")
        low = Lowering()
        logp: Ref = In(0)
        if self.softmax:
            want_log_prob = len(outputs) > 1
            stats = low.temp(DType.float32, (n * d, 2))
            low.launch(row_stats, [In(0)], stats, n=c, inner=d)
            logp = Out(1) if want_log_prob else low.temp(inputs[0].dtype, (n, c, d))
            low.launch(softmax_apply, [In(0), stats], logp, n=c, inner=d, mode=LOG_SOFTMAX)
        consts = dict(c=c, d=d, ignore=int(ignore or 0), has_ignore=ignore is not None,
                      has_weight=has_weight)
        args = [logp, In(1), In(2) if has_weight else In(1)]
        if reduction == "none":
            low.launch(nll_none, args, Out(0), **consts)
        else:
            block, blocks = reduction_blocks(n * d)
            partial = low.temp(DType.float32, (blocks, 2))
            low.launch(nll_partial, args, partial, block=block, **consts)
            low.launch(nll_finish, [partial], Out(0), mean=reduction == "mean")
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(3)
        x = rng.standard_normal((3, 5, 2, 2)).astype(np.float32)
        t = rng.integers(0, 5, (3, 2, 2)).astype(np.int64)
        t[0, 0, 0] = -1
        w = rng.random(5).astype(np.float32) + 0.1
        x2 = rng.standard_normal((4, 3)).astype(np.float32)
        t2 = np.array([0, 2, 1, 2], np.int32)
        n_out = 2 if self.softmax else 1
        return [
            OpCase("nc_mean", [x2, t2]),
            OpCase("nc_sum_weight", [x2, t2, w[:3]], {"reduction": "sum"}),
            OpCase("ncd_none_ignore", [x, t], {"reduction": "none", "ignore_index": -1},
                   n_outputs=n_out),
            OpCase("ncd_mean_weight_ignore", [x, t, w], {"ignore_index": -1}, n_outputs=n_out),
            OpCase("ncd_sum_ignore_high", [x, np.where(t < 0, 7, t), w],
                   {"reduction": "sum", "ignore_index": 7}),
            OpCase("ncd_mean_ignore_class", [x, np.abs(t)], {"ignore_index": 2}),
        ]


class NegativeLogLikelihoodLoss(_LossBase):
    op_type = "NegativeLogLikelihoodLoss"
    since_version = 12


class SoftmaxCrossEntropyLoss(_LossBase):
    op_type = "SoftmaxCrossEntropyLoss"
    since_version = 12
    softmax = True


OPS: list[type[OpDef]] = [NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss]
