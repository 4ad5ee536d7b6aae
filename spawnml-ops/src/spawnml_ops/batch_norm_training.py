"""BatchNormalization in training mode (opset 14+, ``training_mode=1``).

Y is normalised with the batch's own statistics, the mean and the population variance of
each channel over every axis but 1; the optional outputs ``running_mean`` and
``running_var`` blend the given ``input_mean``/``input_var`` with them:
``running = input * momentum + batch * (1 - momentum)``. Portable: the statistics are one
``norm_stats`` launch (mean and 1/sqrt(var + eps) per channel into a float32 temporary),
Y one ``norm_apply`` launch, and each running statistic one small launch over the channels
(the batch variance is recovered from 1/sqrt(var + eps), exact to float32 rounding).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, kernel
from spawnml.op import In, Lowering, Node, OpCase, Out, TensorInfo

from .norm_kernels import (
    PARAM_INDEXED,
    apply_consts,
    norm_apply,
    norm_stats,
    split_axes,
    stats_consts,
)

DEFAULT_MOMENTUM = 0.9


@kernel
def running_stat(stats: Tensor, given: Tensor, out: Output, column: int, momentum: float,
                 eps: float):
    """given * momentum + batch * (1 - momentum); the batch statistic is column 0 (mean)
    or column 1 (1 / sqrt(var + eps), turned back into var) of the statistics row."""
    s = stats.flat[out.flat * 2 + column]
    batch = s
    if column == 1:
        batch = max(1.0 / (s * s) - eps, 0.0)
    return cast(cast(given.flat[out.flat], f32) * momentum + batch * (1.0 - momentum),
                out.dtype)


def training_outputs(inputs: Sequence[TensorInfo | None], n_outputs: int) -> list[TensorInfo]:
    """Y, then running_mean and running_var (as input_mean and input_var) where asked for."""
    outs = [TensorInfo(inputs[0].dtype, inputs[0].shape)]  # type: ignore[union-attr]
    return outs + [inputs[k] for k in (3, 4)][: n_outputs - 1]  # type: ignore[misc]


def training_reference(x: np.ndarray, params: Sequence[np.ndarray], eps: float,
                       momentum: float, n_outputs: int) -> list[np.ndarray]:
    """onnx's formula in float64: Y, running_mean, running_var."""
    scale, bias, mean, var = (np.asarray(p, np.float64) for p in params)
    t = x.astype(np.float64)
    axes = tuple(a for a in range(t.ndim) if a != 1)
    shape = (1, -1, *([1] * (t.ndim - 2)))
    batch_mean, batch_var = t.mean(axis=axes), t.var(axis=axes)
    y = ((t - batch_mean.reshape(shape)) / np.sqrt(batch_var.reshape(shape) + eps)
         * scale.reshape(shape) + bias.reshape(shape))
    running = [mean * momentum + batch_mean * (1 - momentum),
               var * momentum + batch_var * (1 - momentum)]
    outs = [y.astype(x.dtype)] + [r.astype(p.dtype) for r, p in zip(running, params[2:])]
    return outs[:n_outputs]


def lower_training(node: Node, shape: Sequence[int], eps: float, momentum: float,
                   n_outputs: int) -> Lowering:
    """Statistics, Y, then each running statistic asked for."""
    kept, red = split_axes(node, shape, [a for a in range(len(shape)) if a != 1])
    low = Lowering()
    stats = low.temp(DType.float32, (int(shape[1]), 2))
    low.launch(norm_stats, [In(0)], stats, **stats_consts(kept, red, eps))
    inner = int(np.prod(shape[2:], dtype=np.int64))
    low.launch(norm_apply, [In(0), stats, In(1), In(2)], Out(0),
               **apply_consts(kept, param_mode=PARAM_INDEXED, param_div=inner,
                              param_mod=int(shape[1]), has_bias=True, center=True,
                              divide=True, scale_normalized=False))
    for k in range(1, n_outputs):
        low.launch(running_stat, [stats, In(2 + k)], Out(k), column=k - 1,
                   momentum=momentum, eps=eps)
    return low


def training_cases() -> list[OpCase]:
    """Conformance cases of training mode (opset 15)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 2 + 1
    p = [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    var = rng.uniform(0.5, 1.5, 3).astype(np.float32)
    params = [*p, var]
    const = x.copy()
    const[:, 1] = 4.0  # a channel with zero batch variance
    on = {"training_mode": 1}
    tol = {"rtol": 1e-4, "atol": 1e-5}
    return [
        OpCase("training", [x, *params], on, n_outputs=3, **tol),
        OpCase("training_eps_momentum", [x, *params],
               {**on, "epsilon": 1e-2, "momentum": 0.5}, n_outputs=3, **tol),
        OpCase("training_y_only", [x, *params], on, **tol),
        OpCase("training_nc", [x[:, :, 0, 0].copy(), *params], on, n_outputs=3, **tol),
        OpCase("training_constant_channel", [const, *params], on, n_outputs=3, **tol),
    ]
