"""Linear algebra: MatMul (batched, broadcasting, 1-D operands), Gemm and Einsum.

All three lower to the generic contraction kernel (``contraction.contract``): the op only
names each axis with a label.
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import broadcast_shapes, check_dtype, static_shape
from .contraction import Contraction
from .einsum import Einsum
from .fused import activation_args
from .legacy_broadcast import broadcast_flag, is_legacy, require_same_shape

NUMERIC = (DType.float32, DType.float16, DType.float64, DType.int32, DType.int64,
           DType.uint32, DType.uint64, DType.bfloat16)
_BATCH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _rand(seed: int, *shape: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5 if np.dtype(dtype).kind == "i" else 0, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _inputs2(op: OpDef, node: Node, inputs) -> tuple[TensorInfo, TensorInfo]:
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        raise op.fail(node, "inputs A and B are required")
    a, b = inputs[0], inputs[1]
    if a.dtype != b.dtype:
        raise op.fail(node, f"A dtype {a.dtype} differs from B dtype {b.dtype}")
    check_dtype(node, a.dtype, NUMERIC, "A")
    return a, b


class MatMul(OpDef):
    """numpy.matmul semantics: batch dims broadcast; a 1-D operand gains and loses an axis."""

    op_type = "MatMul"
    since_version = 1
    fusable_activations = frozenset({"Relu"})  # integer-safe; others need float results

    def _labels(self, ra: int, rb: int) -> tuple[str, str, str]:
        nb = max(ra - 2, rb - 2, 0)
        batch = _BATCH[:nb]
        la = "k" if ra == 1 else batch[nb - (ra - 2):] + "mk"
        lb = "k" if rb == 1 else batch[nb - (rb - 2):] + "kn"
        return la, lb, batch + ("m" if ra > 1 else "") + ("n" if rb > 1 else "")

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        a, b = _inputs2(self, node, inputs)
        if a.shape is None or b.shape is None:
            return [TensorInfo(a.dtype, None)]
        ra, rb = len(a.shape), len(b.shape)
        if ra == 0 or rb == 0:
            raise self.fail(node, "MatMul operands must have rank >= 1")
        ka = a.shape[-1]
        kb = b.shape[0] if rb == 1 else b.shape[-2]
        if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
            raise self.fail(node, f"inner dims differ: A {a.shape} @ B {b.shape}")
        batch = broadcast_shapes(node, a.shape[:-2], b.shape[:-2]) or ()
        shape = (*batch, *(a.shape[-2:-1] if ra > 1 else ()), *(b.shape[-1:] if rb > 1 else ()))
        return [TensorInfo(a.dtype, shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        a, b = inputs
        if a.dtype.kind == "f":
            return [np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)]
        return [np.matmul(a, b).astype(a.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        a, b = static_shape(inputs[0]), static_shape(inputs[1])
        la, lb, lo = self._labels(len(a), len(b))
        low = Lowering()
        plan = Contraction([(a, la), (b, lb)], lo)
        low.launches.append(plan.launch(
            node, [In(0), In(1)], Out(0), inputs[0].dtype, activation=activation_args(node)
        ))
        return low

    def cases(self) -> list[OpCase]:
        c = [
            OpCase("2d", [_rand(0, 3, 4), _rand(1, 4, 5)]),
            OpCase("batched_broadcast", [_rand(2, 2, 1, 3, 4), _rand(3, 3, 4, 2)]),
            OpCase("1d_1d", [_rand(4, 5), _rand(5, 5)]),
            OpCase("1d_3d", [_rand(6, 4), _rand(7, 2, 4, 3)]),
            OpCase("3d_1d", [_rand(8, 2, 3, 4), _rand(9, 4)]),
            OpCase("size1_dims", [_rand(10, 1, 1, 1), _rand(11, 1, 1)]),
            OpCase("k_zero", [_rand(12, 2, 0), _rand(13, 0, 3)]),
            OpCase("int32", [_rand(14, 3, 4, dtype=np.int32), _rand(15, 4, 2, dtype=np.int32)]),
            OpCase("int64", [_rand(16, 2, 3, dtype=np.int64), _rand(17, 3, 2, dtype=np.int64)]),
            OpCase("f16", [_rand(18, 4, 8, dtype=np.float16), _rand(19, 8, 3, dtype=np.float16)],
                   rtol=5e-3, atol=5e-3),
        ]
        nan = _rand(20, 2, 3)
        nan[0, 1], nan[1, 2] = np.nan, np.inf
        c.append(OpCase("nan_inf", [nan, _rand(21, 3, 2)]))
        return c


class Gemm(OpDef):
    """Y = alpha * A' @ B' + beta * C, C broadcast to (M, N) and optional (opset 11)."""

    op_type = "Gemm"
    since_version = 1
    fusable_activations = frozenset({"Relu"})  # integer-safe; others need float results

    def _check(self, node: Node, inputs) -> tuple[int | str | None, ...]:
        a, b = _inputs2(self, node, inputs)
        for name in ("transA", "transB"):
            if int(self.attr(node, name, 0)) not in (0, 1):
                raise self.fail(node, f"attribute {name!r} must be 0 or 1")
        if a.shape is None or b.shape is None or len(a.shape) != 2 or len(b.shape) != 2:
            raise self.fail(node, f"A and B must be 2-D, got {a.shape} and {b.shape}")
        m, ka = a.shape[::-1] if self.attr(node, "transA", 0) else a.shape
        kb, n = b.shape[::-1] if self.attr(node, "transB", 0) else b.shape
        if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
            raise self.fail(node, f"inner dims differ: A {a.shape} and B {b.shape} "
                                  f"(transA={self.attr(node, 'transA', 0)}, "
                                  f"transB={self.attr(node, 'transB', 0)})")
        c = inputs[2] if len(inputs) > 2 else None
        if c is not None:
            if c.dtype != a.dtype:
                raise self.fail(node, f"C dtype {c.dtype} differs from A dtype {a.dtype}")
            if c.shape is not None and (len(c.shape) > 2 or any(
                isinstance(d, int) and isinstance(t, int) and d not in (1, t)
                for d, t in zip(c.shape[::-1], (n, m))
            )):
                raise self.fail(node, f"C {c.shape} does not broadcast to (M, N) = {(m, n)}")
            if is_legacy(node) and c.shape is not None and not broadcast_flag(self, node):
                require_same_shape(self, node, c.shape, (m, n), "C", "(M, N)")
            if not a.dtype.is_float and (
                float(self.attr(node, "alpha", 1.0)) != 1.0
                or float(self.attr(node, "beta", 1.0)) != 1.0
            ):
                raise UnsupportedOpError(f"{node.describe()}: integer Gemm with alpha or "
                                         "beta != 1 is not supported")
        return m, n

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        return [TensorInfo(inputs[0].dtype, self._check(node, inputs))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else None
        wide = np.float64 if a.dtype.kind == "f" else a.dtype
        a = a.T if self.attr(node, "transA", 0) else a
        b = b.T if self.attr(node, "transB", 0) else b
        y = float(self.attr(node, "alpha", 1.0)) * (a.astype(wide) @ b.astype(wide)) \
            if a.dtype.kind == "f" else a @ b
        if c is not None:
            y = y + (float(self.attr(node, "beta", 1.0)) * c.astype(wide)
                     if a.dtype.kind == "f" else c)
        return [np.asarray(y).astype(inputs[0].dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        self._check(node, inputs)
        a, b = static_shape(inputs[0]), static_shape(inputs[1])
        la = "km" if self.attr(node, "transA", 0) else "mk"
        lb = "nk" if self.attr(node, "transB", 0) else "kn"
        has_c = len(inputs) > 2 and inputs[2] is not None
        low = Lowering()
        plan = Contraction([(a, la), (b, lb)], "mn")
        low.launches.append(plan.launch(
            node, [In(0), In(1)], Out(0), inputs[0].dtype,
            alpha=float(self.attr(node, "alpha", 1.0)), beta=float(self.attr(node, "beta", 1.0)),
            c=In(2) if has_c else None, activation=activation_args(node),
        ))
        return low

    def cases(self) -> list[OpCase]:
        a, b = _rand(0, 3, 4), _rand(1, 4, 5)
        attrs = {"alpha": 0.5, "beta": 2.0}
        return [
            OpCase("no_c", [a, b]),
            OpCase("matrix_c", [a, b, _rand(2, 3, 5)], attrs),
            OpCase("row_c", [a, b, _rand(3, 5)], attrs),
            OpCase("col_c", [a, b, _rand(4, 3, 1)], attrs),
            OpCase("scalar_c", [a, b, np.array(1.5, np.float32)], attrs),
            OpCase("trans_a_b", [a.T.copy(), b.T.copy(), _rand(5, 1, 1)],
                   {"transA": 1, "transB": 1, "alpha": -1.0}),
            OpCase("size1", [_rand(6, 1, 1), _rand(7, 1, 1), _rand(8, 1)]),
            OpCase("int32", [_rand(9, 2, 3, dtype=np.int32), _rand(10, 3, 2, dtype=np.int32),
                             _rand(11, 2, dtype=np.int32)]),
            OpCase("nan_c", [a, b, np.array([np.nan, np.inf, 0, 1, -np.inf], np.float32)],
                   attrs),
        ]


OPS: list[type[OpDef]] = [MatMul, Gemm, Einsum]
__all__ = ["Einsum", "Gemm", "MatMul", "OPS"]
