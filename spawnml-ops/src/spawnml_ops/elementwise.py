"""Elementwise unary math and activations (the pattern every family follows).

Each op is a kernel-language ``@helper`` for one element, run by ``common.unary_map``;
the numpy reference is the truth the conformance suite compares against.
"""


from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Helper, helper
from spawnml.op import In, Lowering, Node, OpDef, Out, TensorInfo

from .common import unary_map

FLOATS = (DType.float32, DType.float16, DType.float64)


class UnaryOp(OpDef):
    """An elementwise op: same shape and dtype in and out."""

    fn: Helper
    numpy_fn: Callable[[np.ndarray], np.ndarray]
    dtypes: Sequence[DType] = FLOATS

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None:
            raise self.fail(node, "input 0 is required")
        if x.dtype not in self.dtypes:
            raise self.fail(node, f"dtype {x.dtype} is not supported (expected one of "
                                  f"{[str(d) for d in self.dtypes]})")
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        with np.errstate(all="ignore"):
            return [np.asarray(type(self).numpy_fn(x)).astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(unary_map, [In(0)], Out(0), fn=type(self).fn)
        return low


@helper
def _relu(v):
    return max(v, 0.0)


class Relu(UnaryOp):
    op_type = "Relu"
    since_version = 6
    fn = _relu
    numpy_fn = staticmethod(lambda x: np.maximum(x, 0))


OPS: list[type[OpDef]] = [Relu]
