"""Test-local OpDefs (independent of spawnml-ops, which may change under these tests)."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, helper, kernel, static_range
from spawnml.op import In, Lowering, OpCase, OpDef, Out, TensorInfo


@helper
def _offset(x, out):
    off = 0
    for d in static_range(x.ndim):
        if x.shape[d] != 1:
            off = off + out.index[d + out.ndim - x.ndim] * x.strides[d]
    return off


@kernel
def _add(a: Tensor, b: Tensor, out: Output):
    return a.flat[_offset(a, out)] + b.flat[_offset(b, out)]


@kernel
def _relu(x: Tensor, out: Output):
    return max(x.flat[out.flat], 0.0)


class SampleAdd(OpDef):
    """Add with broadcasting over every numeric dtype (declares its domain)."""

    op_type = "Add"
    since_version = 14
    dtypes = (DType.float32, DType.float16, DType.int32, DType.int64, DType.uint8)
    elementwise_inputs = 2

    def infer(self, node, inputs, values):
        a, b = inputs
        if a.dtype != b.dtype or a.dtype not in self.dtypes:
            raise self.fail(node, f"unsupported dtypes {a.dtype}, {b.dtype}")
        shape = np.broadcast_shapes(a.shape, b.shape)
        return [TensorInfo(a.dtype, tuple(shape))]

    def reference(self, node, inputs):
        a, b = inputs
        with np.errstate(all="ignore"):
            return [np.add(a, b).astype(a.dtype)]

    def lower(self, node, inputs, outputs, values):
        low = Lowering()
        low.launch(_add, [In(0), In(1)], Out(0))
        return low


class SampleRelu(OpDef):
    """Relu over floats, with one declared case of its own."""

    op_type = "Relu"
    since_version = 14
    dtypes = (DType.float32, DType.float16)
    elementwise_inputs = 1

    def infer(self, node, inputs, values):
        if inputs[0].dtype not in self.dtypes:
            raise self.fail(node, f"unsupported dtype {inputs[0].dtype}")
        return [inputs[0]]

    def reference(self, node, inputs):
        return [np.maximum(inputs[0], 0).astype(inputs[0].dtype)]

    def cases(self):
        return [OpCase("ramp", [np.linspace(-3, 3, 13, dtype=np.float32)])]

    def lower(self, node, inputs, outputs, values):
        low = Lowering()
        low.launch(_relu, [In(0)], Out(0))
        return low
