"""Binary operators with numpy broadcasting."""


from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Helper, helper
from spawnml.op import In, Lowering, Node, OpDef, Out, TensorInfo

from .common import binary_map, broadcast_shapes, same_dtype

NUMERIC = (DType.float32, DType.float16, DType.float64, DType.int32, DType.int64,
           DType.uint8, DType.int8, DType.uint32, DType.int16, DType.uint16)


class BinaryOp(OpDef):
    fn: Helper
    numpy_fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    dtypes: Sequence[DType] = NUMERIC

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects two inputs")
        dt = same_dtype(node, inputs)
        if dt not in self.dtypes:
            raise self.fail(node, f"dtype {dt} is not supported")
        return [TensorInfo(dt, broadcast_shapes(node, inputs[0].shape, inputs[1].shape))]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        a, b = inputs
        with np.errstate(all="ignore"):
            return [np.asarray(type(self).numpy_fn(a, b)).astype(a.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(binary_map, [In(0), In(1)], Out(0), fn=type(self).fn)
        return low


@helper
def _add(a, b):
    return a + b


class Add(BinaryOp):
    op_type = "Add"
    since_version = 7
    fn = _add
    numpy_fn = staticmethod(np.add)


OPS: list[type[OpDef]] = [Add]
