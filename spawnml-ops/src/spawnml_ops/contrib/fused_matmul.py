"""FusedMatMul: alpha * op(A) @ op(B) with numpy.matmul batching, where op transposes the
last two axes (transA/transB) and/or reads the batch axes from axis 1 on, the first axis
being a matrix axis (transBatchA/transBatchB: A stored as (M, batch..., K)). It is one
launch of the generic contraction kernel: the op only labels each stored axis."""

from __future__ import annotations

import numpy as np

from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from ..common import broadcast_shapes, static_shape
from ..contraction import Contraction
from .common import DOMAIN, FLOATS, float_attr, float_input, int_attr, rand

_BATCH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _labels(rank: int, nb: int, rows: str, trans: bool, trans_batch: bool) -> str:
    """Labels of a stored operand of ``rank`` whose logical matrix axes are ``rows`` (e.g.
    "mk"), with ``nb`` output batch axes."""
    first, last = (rows[1], rows[0]) if trans else (rows[0], rows[1])
    batch = _BATCH[nb - (rank - 2): nb]
    if trans_batch:
        return first + batch + last
    return batch + first + last


def _logical(x: np.ndarray, trans: bool, trans_batch: bool) -> np.ndarray:
    """The operand as numpy.matmul sees it."""
    if trans_batch and x.ndim > 2:
        x = np.moveaxis(x, 0, -2)
    return np.swapaxes(x, -1, -2) if trans else x


class FusedMatMul(OpDef):
    """com.microsoft FusedMatMul (transA, transB, transBatchA, transBatchB, alpha)."""

    domain = DOMAIN
    op_type = "FusedMatMul"
    since_version = 1
    dtypes = FLOATS

    def _flags(self, node: Node) -> dict[str, bool]:
        names = ("transA", "transB", "transBatchA", "transBatchB")
        return {n: bool(int_attr(self, node, n, 0, choices=(0, 1))) for n in names}

    def _geometry(self, node: Node, inputs) -> tuple[str, str, str, tuple[int, ...]]:
        a = float_input(self, node, inputs, 0, "A")
        b = float_input(self, node, inputs, 1, "B")
        if inputs[0].dtype != inputs[1].dtype:
            raise self.fail(node, f"A {inputs[0].dtype} and B {inputs[1].dtype} differ in dtype")
        if len(a) < 2 or len(b) < 2:
            raise self.fail(node, f"A {a} and B {b} must have rank >= 2")
        f = self._flags(node)
        la_shape = _logical(np.empty(a, np.int8), f["transA"], f["transBatchA"]).shape
        lb_shape = _logical(np.empty(b, np.int8), f["transB"], f["transBatchB"]).shape
        if la_shape[-1] != lb_shape[-2]:
            raise self.fail(node, f"inner dimensions differ: A {a} and B {b} with {f}")
        batch = broadcast_shapes(node, la_shape[:-2], lb_shape[:-2]) or ()
        nb = len(batch)
        la = _labels(len(a), nb, "mk", f["transA"], f["transBatchA"])
        lb = _labels(len(b), nb, "kn", f["transB"], f["transBatchB"])
        return la, lb, _BATCH[:nb] + "mn", (*batch, la_shape[-2], lb_shape[-1])

    def _alpha(self, node: Node) -> float:
        return float_attr(self, node, "alpha", 1.0)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        *_, shape = self._geometry(node, inputs)
        self._alpha(node)
        return [TensorInfo(inputs[0].dtype, shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        f = self._flags(node)
        a = _logical(inputs[0].astype(np.float64), f["transA"], f["transBatchA"])
        b = _logical(inputs[1].astype(np.float64), f["transB"], f["transBatchB"])
        return [(self._alpha(node) * np.matmul(a, b)).astype(inputs[0].dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        la, lb, lo, _ = self._geometry(node, inputs)
        plan = Contraction([(static_shape(inputs[0]), la), (static_shape(inputs[1]), lb)], lo)
        low = Lowering()
        low.launches.append(plan.launch(node, [In(0), In(1)], Out(0), inputs[0].dtype,
                                        alpha=self._alpha(node)))
        return low

    def cases(self) -> list[OpCase]:
        a, b = rand(0, 2, 3, 4, 5), rand(1, 2, 3, 5, 6)
        tol = dict(rtol=1e-4, atol=1e-5)
        return [
            OpCase("alpha", [a, b], {"alpha": 0.5}, **tol),
            OpCase("trans_a_b", [np.swapaxes(a, -1, -2).copy(), np.swapaxes(b, -1, -2).copy()],
                   {"transA": 1, "transB": 1}, **tol),
            OpCase("trans_batch_a", [np.moveaxis(a, -2, 0).copy(), b], {"transBatchA": 1},
                   **tol),
            OpCase("trans_batch_b_trans_b", [a, rand(2, 6, 2, 3, 5)],
                   {"transBatchB": 1, "transB": 1, "alpha": -2.0}, **tol),
            OpCase("broadcast_2d", [a, rand(3, 5, 6)], **tol),
            OpCase("f16", [a.astype(np.float16), b.astype(np.float16)], rtol=3e-3, atol=3e-3),
        ]


OPS: list[type[OpDef]] = [FusedMatMul]
