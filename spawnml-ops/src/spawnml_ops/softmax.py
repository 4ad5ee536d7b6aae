"""Softmax, LogSoftmax and Hardmax.

Before opset 13 the input is flattened to 2-D at ``axis`` (default 1) and normalised over
everything from ``axis`` on; from 13 the normalisation runs along the single ``axis``
(default -1). Both are an [outer, n, inner] view (inner = 1 before 13), so one pair of
kernels serves every version: row statistics (max and sum of exp) into a temporary, then
an elementwise apply.
"""

# ruff: noqa: F821  (kernel intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import axis_pos, prod, rank_of, row_base, static
from .common import normalize_axis

FLOATS = (DType.float32, DType.float16, DType.float64, DType.bfloat16)

SOFTMAX, LOG_SOFTMAX = 0, 1


@kernel
def row_stats(x: Tensor, out: Output, n: int, inner: int):
    """out[row, 0] = max of the row, out[row, 1] = sum(exp(x - max)) (in f32)."""
    row = out.flat // 2
    base = (row // inner) * (n * inner) + row % inner
    m = -math.inf
    for k in range(n):
        m = max(m, cast(x.flat[base + k * inner], f32))
    if out.flat % 2 == 0:
        return m
    s = 0.0
    for k in range(n):
        s += exp(cast(x.flat[base + k * inner], f32) - m)
    return s


@kernel
def softmax_apply(x: Tensor, stats: Tensor, out: Output, n: int, inner: int, mode: int):
    row = (out.flat // (n * inner)) * inner + out.flat % inner
    v = cast(x.flat[out.flat], f32) - stats.flat[row * 2]
    if mode == 1:
        return cast(v - log(stats.flat[row * 2 + 1]), out.dtype)
    return cast(exp(v) / stats.flat[row * 2 + 1], out.dtype)


@kernel
def hardmax(x: Tensor, out: Output, n: int, inner: int):
    """1 at the first maximum of the row, 0 elsewhere; the first NaN is the maximum (as
    ArgMax and numpy; the isnan guard keeps targets whose comparisons with NaN are
    unreliable, GLSL's, in line)."""
    base = row_base(out, n, inner)
    best = x.flat[base]
    best_k = 0
    for k in range(1, n):
        v = x.flat[base + k * inner]
        if not isnan(best) and (v > best or isnan(v)):
            best = v
            best_k = k
    hit = axis_pos(out, n, inner) == best_k
    return cast(hit, out.dtype)


class _SoftmaxBase(OpDef):
    mode: int = SOFTMAX

    def _axis(self, node: Node, rank: int) -> int:
        default = -1 if node.opset >= 13 else 1
        return normalize_axis(node, int(self.attr(node, "axis", default)), rank)

    def view(self, node: Node, shape: Sequence[int]) -> tuple[int, int, int]:
        """(outer, n, inner) of the normalised rows for this opset."""
        axis = self._axis(node, len(shape))
        if node.opset >= 13:
            return prod(shape[:axis]), int(shape[axis]) if shape else 1, prod(shape[axis + 1:])
        return prod(shape[:axis]), prod(shape[axis:]), 1

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None
        if x.dtype not in FLOATS:
            raise self.fail(node, f"dtype {x.dtype} is not supported (float types only)")
        self._axis(node, rank)
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        outer, n, inner = self.view(node, x.shape)
        v = x.astype(np.float64).reshape(outer, n, inner)
        with np.errstate(all="ignore"):
            y = self.numpy_rows(v)
        return [y.reshape(x.shape).astype(x.dtype)]

    def numpy_rows(self, v: np.ndarray) -> np.ndarray:
        m = v.max(axis=1, keepdims=True)
        e = v - m
        s = np.exp(e).sum(axis=1, keepdims=True)
        return e - np.log(s) if self.mode == LOG_SOFTMAX else np.exp(e) / s

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        outer, n, inner = self.view(node, static(inputs[0]))
        low = Lowering()
        stats = low.temp(DType.float32, (outer * inner, 2))
        low.launch(row_stats, [In(0)], stats, n=n, inner=inner)
        low.launch(softmax_apply, [In(0), stats], Out(0), n=n, inner=inner, mode=self.mode)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        inf_rows = np.array([[-np.inf, -np.inf, 0.0], [-np.inf, 1.0, 2.0], [np.inf, 0.0, 1.0]],
                            np.float32)
        cases = [
            OpCase("default_axis", [x]),
            OpCase("axis0", [x], {"axis": 0}),
            OpCase("neg_axis", [x], {"axis": -2}),
            OpCase("opset11_flatten", [x], {"axis": 1}, opset=11),
            OpCase("opset11_axis0", [x], {"axis": 0}, opset=11),
            OpCase("opset11_default", [x], opset=11),
            OpCase("size1_axis", [rng.standard_normal((3, 1)).astype(np.float32)]),
            OpCase("size0", [np.zeros((0, 4), np.float32)]),
            OpCase("large_values", [np.array([[1000.0, 1001.0, -1000.0]], np.float32)]),
            OpCase("inf_rows", [inf_rows[1:2]]),
            OpCase("float16", [x.astype(np.float16)], rtol=2e-3, atol=2e-3),
            OpCase("float64", [x.astype(np.float64)]),
        ]
        return cases


class Softmax(_SoftmaxBase):
    op_type = "Softmax"
    mode = SOFTMAX


class LogSoftmax(_SoftmaxBase):
    op_type = "LogSoftmax"
    mode = LOG_SOFTMAX


class Hardmax(_SoftmaxBase):
    op_type = "Hardmax"

    def numpy_rows(self, v: np.ndarray) -> np.ndarray:
        y = np.zeros_like(v)
        if v.shape[1]:
            idx = np.argmax(v, axis=1)[:, None, :]
            np.put_along_axis(y, idx, 1.0, axis=1)
        return y

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        _, n, inner = self.view(node, static(inputs[0]))
        low = Lowering()
        low.launch(hardmax, [In(0)], Out(0), n=n, inner=inner)
        return low

    def cases(self) -> list[OpCase]:
        ties = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]], np.float32)
        return [c for c in super().cases() if c.name not in ("large_values", "inf_rows")] + [
            OpCase("ties_first_wins", [ties]),
            OpCase("nan_first_wins", [np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, -1.0, np.nan,
                                                                        5.0]], np.float32)]),
        ]


OPS: list[type[OpDef]] = [Softmax, LogSoftmax, Hardmax]
