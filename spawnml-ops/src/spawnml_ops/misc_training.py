"""The training optimisers of ai.onnx.preview.training: Adagrad, Adam and Momentum.

Each takes (R, T, X..., G..., state...) for n tensors and returns (X_new..., state_new...);
they are elementwise and computed on the host (training steps are not the inference path
spawnml compiles; declared ``host_only``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from spawnml.op import Node, OpCase, OpDef, TensorInfo

TRAINING = "ai.onnx.preview.training"


class _Optimizer(OpDef):
    domain = TRAINING
    since_version = 1
    host_only = True
    n_states: int  # per-tensor state inputs after X and G

    def _n(self, node: Node, count: int) -> int:
        per = 2 + self.n_states
        if count < 2 + per or (count - 2) % per:
            raise self.fail(node, f"expects R, T and {per} inputs per tensor, got {count}")
        return (count - 2) // per

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        n = self._n(node, len(inputs))
        if any(i is None for i in inputs):
            raise self.fail(node, "no input may be omitted")
        blocks = [0, *range(2, 2 + self.n_states)]  # X, then each state (G is not output)
        return [inputs[2 + n * b + i] for b in blocks for i in range(n)][: len(node.outputs)]

    def step(self, node: Node, r: float, t: int, x, g, states: Sequence) -> list:
        raise NotImplementedError

    def reference(self, node, inputs) -> list[np.ndarray]:
        n = self._n(node, len(inputs))
        r = float(np.asarray(inputs[0]))
        t = int(np.asarray(inputs[1]))
        outs: list[list[np.ndarray]] = [[] for _ in range(1 + self.n_states)]
        for i in range(n):
            x = np.asarray(inputs[2 + i], np.float64)
            g = np.asarray(inputs[2 + n + i], np.float64)
            states = [np.asarray(inputs[2 + n * (2 + k) + i], np.float64)
                      for k in range(self.n_states)]
            for k, v in enumerate(self.step(node, r, t, x, g, states)):
                outs[k].append(v.astype(np.asarray(inputs[2 + i]).dtype))
        return [a for group in outs for a in group][: len(node.outputs)]

    def _cases(self, attrs: dict, make: Callable[[int], list[np.ndarray]]) -> list[OpCase]:
        r, t = np.array(0.1, np.float32), np.array(3, np.int64)
        n_out = 1 + self.n_states
        one, two = make(1), make(2)
        return [
            OpCase("single", [r, t, *one], attrs, n_outputs=n_out, atol=1e-5),
            OpCase("two_tensors", [r, t, *two], attrs, n_outputs=2 * n_out, atol=1e-5),
            OpCase("t0", [r, np.array(0, np.int64), *one], attrs, n_outputs=n_out, atol=1e-5),
        ]


def _tensors(per: int, n: int) -> list[np.ndarray]:
    """Inputs for n tensors: X..., G..., then the states (non-negative, for H)."""
    rng = np.random.default_rng(16 + n)
    shapes = [(3,), (2, 2)][:n]
    out = []
    for k in range(per):
        for s in shapes:
            a = rng.standard_normal(s).astype(np.float32)
            out.append(np.abs(a) if k == per - 1 else a)
    return out


class Adagrad(_Optimizer):
    op_type = "Adagrad"
    n_states = 1

    def step(self, node, r, t, x, g, states) -> list:
        (h,) = states
        lr = r / (1 + t * float(self.attr(node, "decay_factor", 0.0)))
        g = float(self.attr(node, "norm_coefficient", 0.0)) * x + g
        h = h + g * g
        return [x - lr * g / (np.sqrt(h) + float(self.attr(node, "epsilon", 1e-6))), h]

    def cases(self) -> list[OpCase]:
        return self._cases({"decay_factor": 0.1, "norm_coefficient": 0.01},
                           lambda n: _tensors(3, n))


class Adam(_Optimizer):
    op_type = "Adam"
    n_states = 2

    def step(self, node, r, t, x, g, states) -> list:
        v, h = states
        alpha = float(self.attr(node, "alpha", 0.9))
        beta = float(self.attr(node, "beta", 0.999))
        g = float(self.attr(node, "norm_coefficient", 0.0)) * x + g
        v = alpha * v + (1 - alpha) * g
        h = beta * h + (1 - beta) * g * g
        lr = r * np.sqrt(1 - beta**t) / (1 - alpha**t) if t > 0 else r
        x = x - lr * v / (np.sqrt(h) + float(self.attr(node, "epsilon", 1e-6)))
        return [(1 - float(self.attr(node, "norm_coefficient_post", 0.0))) * x, v, h]

    def cases(self) -> list[OpCase]:
        return self._cases({"alpha": 0.85, "beta": 0.95, "norm_coefficient": 0.001,
                            "norm_coefficient_post": 0.01}, lambda n: _tensors(4, n))


class Momentum(_Optimizer):
    op_type = "Momentum"
    n_states = 1

    def step(self, node, r, t, x, g, states) -> list:
        (v,) = states
        alpha = float(self.attr(node, "alpha", required=True))
        beta = float(self.attr(node, "beta", required=True))
        mode = self.attr(node, "mode", "standard")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("standard", "nesterov"):
            raise self.fail(node, f"attribute 'mode' = {mode!r} must be standard or nesterov")
        g = float(self.attr(node, "norm_coefficient", required=True)) * x + g
        v = alpha * v + (beta if t > 0 else 1.0) * g
        return [x - r * (g + alpha * v if mode == "nesterov" else v), v]

    def cases(self) -> list[OpCase]:
        attrs = {"alpha": 0.9, "beta": 0.1, "norm_coefficient": 0.01, "mode": "standard"}
        nesterov = OpCase("nesterov", [np.array(0.1, np.float32), np.array(1, np.int64),
                                       *_tensors(3, 1)], {**attrs, "mode": "nesterov"},
                          n_outputs=2, atol=1e-5)
        return [*self._cases(attrs, lambda n: _tensors(3, n)), nesterov]


OPS: list[type[OpDef]] = [Adagrad, Adam, Momentum]
