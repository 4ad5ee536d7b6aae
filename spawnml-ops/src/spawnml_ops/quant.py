"""Linear quantisation: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (integer
matmul and convolution are in ``quant_matmul`` and ``quant_conv``).

Integer types: uint8/int8 (all opsets), uint16/int16 (opset 21+). Rounding is half to even
with saturation; NaN saturates to the type's lowest value (what onnx.reference gives on
x86). The narrow types (float8 from opset 19, int4/uint4 21, float4e2m1 23, int2/uint2 25)
have no kernel type: those nodes run on the host (``exotic_cast``)."""


from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, f32, helper, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import normalize_axis
from .exotic_cast import (
    FLOAT8,
    QUANT_TYPES,
    check_float_zero_point,
    dequantize_values,
    quantize_narrow,
    require_host,
    since_opset,
)
from .quant_common import QRANGES, param_offset, quant_dtype, saturate, saturate_round, zero_or
from .quant_conv import QUANT_CONV_OPS
from .quant_matmul import QUANT_MATMUL_OPS

_FLOATS = (DType.float32, DType.float16)


@kernel
def quantize(x: Tensor, scale: Tensor, zp: Tensor, out: Output, axis: int, block: int,
             lo: float, hi: float):
    v = cast(x.flat[out.flat], f32) / cast(scale.flat[param_offset(scale, out, axis, block)], f32)
    z = cast(zp.flat[param_offset(zp, out, axis, block)], f32)
    return cast(saturate(round(v) + z, lo, hi), out.dtype)


@kernel
def dequantize(x: Tensor, scale: Tensor, zp: Tensor, out: Output, axis: int, block: int):
    v = cast(x.flat[out.flat], f32) - cast(zp.flat[param_offset(zp, out, axis, block)], f32)
    return cast(v * cast(scale.flat[param_offset(scale, out, axis, block)], f32), out.dtype)


class LinearQuantOp(OpDef):
    """Shared by Quantize/DequantizeLinear: axis and block_size checks, parameter layout."""

    since_version = 10

    def layout(self, node: Node, x: TensorInfo, scale: TensorInfo,
               zp: TensorInfo | None) -> tuple[int, int]:
        """(axis, block_size) after checking the scale/zero-point shapes."""
        rank = len(x.shape) if x.shape is not None else None
        axis = int(self.attr(node, "axis", 1)) if node.opset >= 13 else 1
        block = int(self.attr(node, "block_size", 0)) if node.opset >= 21 else 0
        if block < 0:
            raise self.fail(node, f"block_size must be >= 0, got {block}")
        if zp is not None and zp.shape is not None and scale.shape is not None \
                and tuple(zp.shape) != tuple(scale.shape) \
                and not all(d == 1 for d in (*zp.shape, *scale.shape)):
            raise self.fail(node, f"scale {tuple(scale.shape)} and zero point "
                                  f"{tuple(zp.shape)} have different shapes")
        shape = tuple(scale.shape) if scale.shape is not None else None
        if shape is None or rank is None or all(d == 1 for d in shape):
            return 0, block  # per tensor: the axis is unused
        ax = normalize_axis(node, axis, rank)
        want = list(x.shape)  # type: ignore[arg-type]
        if block == 0:
            if len(shape) != 1 or shape[0] != want[ax]:
                raise self.fail(node, f"per-axis scale must have shape ({want[ax]},) for "
                                      f"axis {axis}, got {shape}")
            return ax, block
        if isinstance(want[ax], int):
            want[ax] = -(-want[ax] // block)
        if len(shape) != rank or any(isinstance(a, int) and isinstance(b, int) and a != b
                                     for a, b in zip(shape, want)):
            raise self.fail(node, f"blocked scale must have shape {tuple(want)} for "
                                  f"block_size {block}, got {shape}")
        return ax, block

    def check_narrow(self, node: Node, dt: DType) -> None:
        """A narrow quantised type is valid from the opset that added it."""
        if dt in QUANT_TYPES and node.opset < since_opset(dt):
            raise self.fail(node, f"{dt} needs opset {since_opset(dt)}")

    @staticmethod
    def expand(p: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
        """A scale/zero point broadcast to the data's shape (numpy reference)."""
        p = np.asarray(p)
        if p.size == 1:
            return p.reshape(())
        if block == 0:
            dims = [1] * len(shape)
            dims[axis] = p.size
            return p.reshape(dims)
        return np.repeat(p, block, axis=axis).take(range(shape[axis]), axis=axis)


class QuantizeLinear(LinearQuantOp):
    """y = saturate(round(x / scale) + zero_point)."""

    op_type = "QuantizeLinear"

    def out_dtype(self, node: Node, zp: TensorInfo | None) -> DType:
        attr = int(self.attr(node, "output_dtype", 0)) if node.opset >= 21 else 0
        dt = zp.dtype if zp is not None else (self.quant_type(node, attr) if attr
                                              else DType.uint8)
        if attr and self.quant_type(node, attr) is not dt:
            raise self.fail(node, f"output_dtype {self.quant_type(node, attr)} differs from "
                                  f"the zero point's dtype {dt}")
        if dt not in QRANGES and dt not in QUANT_TYPES:
            raise UnsupportedOpError(f"{node.describe()}: output type {dt} is not supported")
        self.check_narrow(node, dt)
        if dt in (DType.int16, DType.uint16) and node.opset < 21:
            raise self.fail(node, f"{dt} outputs need opset 21")
        return dt

    @staticmethod
    def quant_type(node: Node, code: int) -> DType:
        """The ``output_dtype`` attribute's type: a narrow one or an integer type."""
        narrow = [d for d in QUANT_TYPES if d.onnx == code]
        return narrow[0] if narrow else quant_dtype(node, code)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs x, y_scale[, y_zero_point]")
        x, scale = inputs[0], inputs[1]
        zp = inputs[2] if len(inputs) > 2 else None
        if x.dtype not in (*_FLOATS, DType.int32, DType.float64):
            raise self.fail(node, f"x must be float or int32, got {x.dtype}")
        if int(self.attr(node, "saturate", 1)) not in (0, 1):
            raise self.fail(node, "saturate must be 0 or 1")
        self.layout(node, x, scale, zp)
        return [TensorInfo(self.out_dtype(node, zp), x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, scale = np.asarray(inputs[0]), np.asarray(inputs[1])
        zp = inputs[2] if len(inputs) > 2 else None
        info = [None if a is None else TensorInfo(as_dtype(np.asarray(a).dtype), np.shape(a))
                for a in (x, scale, zp)]
        axis, block = self.layout(node, info[0], info[1], info[2])  # type: ignore[arg-type]
        dt = self.out_dtype(node, info[2])
        s = self.expand(scale, x.shape, axis, block)
        if dt in QUANT_TYPES:  # x / scale in numpy's type, as onnx.reference computes it
            with np.errstate(all="ignore"):
                z = None if zp is None else self.expand(zp, x.shape, axis, block)
                return [quantize_narrow(x / s, z, dt, bool(self.attr(node, "saturate", 1)))]
        with np.errstate(all="ignore"):
            q = np.rint(x.astype(np.float32) / s.astype(np.float32)).astype(np.float64)
        if zp is not None:
            q = q + self.expand(zp, x.shape, axis, block).astype(np.float64)
        return [saturate_round(q, dt)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        require_host(node, outputs[0].dtype)
        zp = inputs[2] if len(inputs) > 2 else None
        axis, block = self.layout(node, inputs[0], inputs[1], zp)
        lo, hi = QRANGES[outputs[0].dtype]
        low = Lowering()
        low.launch(quantize, [In(0), In(1), zero_or(In(2) if zp is not None else None)],
                   Out(0), axis=axis, block=block, lo=float(lo), hi=float(hi))
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[0.0, 1.5, 2.5, -2.5], [300.0, -300.0, np.nan, np.inf],
                      [-np.inf, 0.49, 127.5, -128.5]], np.float32)
        s = np.array(1.0, np.float32)
        return [
            OpCase("uint8_default", [x, s]),
            OpCase("uint8_zp", [x, np.array(2.0, np.float32), np.array(128, np.uint8)]),
            OpCase("int8", [x, s, np.array(0, np.int8)]),
            OpCase("int8_opset10", [x, s, np.array(-3, np.int8)], opset=10),
            OpCase("per_axis", [x, np.array([1.0, 0.5, 2.0], np.float32),
                                np.array([0, 1, -1], np.int8)], {"axis": 0}),
            OpCase("per_axis_negative", [x, np.array([1.0, 2.0, 4.0, 0.5], np.float32),
                                         np.array([1, 2, 3, 4], np.uint8)], {"axis": -1}),
            OpCase("blocked", [x, np.array([[1.0, 2.0], [0.5, 4.0], [1.0, 1.0]], np.float32),
                               np.array([[0, 1], [2, 3], [4, 5]], np.int8)],
                   {"axis": 1, "block_size": 3}, opset=21),
            OpCase("int16", [x * 100, s, np.array(5, np.int16)], opset=21),
            OpCase("uint16_output_dtype", [x * 100, s], {"output_dtype": 4}, opset=21),
            OpCase("float16_in", [x.astype(np.float16), np.array(0.5, np.float16),
                                  np.array(1, np.int8)], opset=19),
            OpCase("size1", [np.array([[3.3]], np.float32), np.array([2.0], np.float32)]),
        ]


class DequantizeLinear(LinearQuantOp):
    """y = (x - zero_point) * scale."""

    op_type = "DequantizeLinear"

    def out_dtype(self, node: Node, scale: TensorInfo) -> DType:
        attr = int(self.attr(node, "output_dtype", 0)) if node.opset >= 23 else 0
        dt = as_dtype(attr) if attr else scale.dtype
        if dt not in (*_FLOATS, DType.float64):
            raise UnsupportedOpError(f"{node.describe()}: output type {dt} is not supported")
        return dt

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs x, x_scale[, x_zero_point]")
        x, scale = inputs[0], inputs[1]
        zp = inputs[2] if len(inputs) > 2 else None
        if x.dtype not in (*QRANGES, DType.int32, *QUANT_TYPES):
            raise UnsupportedOpError(f"{node.describe()}: input type {x.dtype} is not supported")
        self.check_narrow(node, x.dtype)
        if zp is not None and zp.dtype is not x.dtype:
            raise self.fail(node, f"zero point dtype {zp.dtype} differs from x's {x.dtype}")
        self.layout(node, x, scale, zp)
        return [TensorInfo(self.out_dtype(node, scale), x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, scale = np.asarray(inputs[0]), np.asarray(inputs[1])
        zp = inputs[2] if len(inputs) > 2 else None
        info = [None if a is None else TensorInfo(as_dtype(np.asarray(a).dtype), np.shape(a))
                for a in (x, scale, zp)]
        axis, block = self.layout(node, info[0], info[1], info[2])  # type: ignore[arg-type]
        if info[0].dtype in QUANT_TYPES:  # type: ignore[union-attr]
            z = None if zp is None else self.expand(zp, x.shape, axis, block)
            if info[0].dtype in FLOAT8:  # type: ignore[union-attr]
                check_float_zero_point(node, z)
            dx = dequantize_values(x, z)
        else:
            dx = x.astype(np.float32)
            if zp is not None:
                dx = dx - self.expand(zp, x.shape, axis, block).astype(np.float32)
        y = dx * self.expand(scale, x.shape, axis, block).astype(np.float32)
        return [y.astype(self.out_dtype(node, info[1]).numpy)]  # type: ignore[arg-type]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        require_host(node, inputs[0].dtype)
        zp = inputs[2] if len(inputs) > 2 else None
        axis, block = self.layout(node, inputs[0], inputs[1], zp)
        low = Lowering()
        low.launch(dequantize, [In(0), In(1), zero_or(In(2) if zp is not None else None)],
                   Out(0), axis=axis, block=block)
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[0, 3, 128, 255], [1, 2, 3, 4], [250, 7, 9, 0]], np.uint8)
        return [
            OpCase("uint8", [x, np.array(2.0, np.float32), np.array(128, np.uint8)]),
            OpCase("no_zp", [x, np.array(0.5, np.float32)]),
            OpCase("int8", [x.astype(np.int8), np.array(0.25, np.float32),
                            np.array(-1, np.int8)], opset=10),
            OpCase("per_axis", [x, np.array([1.0, 2.0, 3.0], np.float32),
                                np.array([0, 1, 2], np.uint8)], {"axis": 0}),
            OpCase("per_axis_negative", [x, np.array([1.0, 2.0, 3.0, 4.0], np.float32)],
                   {"axis": -1}),
            OpCase("blocked", [x, np.array([[1.0, 2.0], [0.5, 4.0], [1.0, np.inf]], np.float32),
                               np.array([[0, 1], [2, 3], [4, 5]], np.uint8)],
                   {"axis": 1, "block_size": 2}, opset=21),
            OpCase("int32", [np.array([-70000, 5, 2**20], np.int32), np.array(0.5, np.float32)]),
            OpCase("int16", [np.array([-32768, 0, 32767], np.int16), np.array(2.0, np.float32),
                             np.array(-2, np.int16)], opset=21),
            OpCase("float16_scale", [x, np.array(0.5, np.float16)], opset=19, atol=1e-3),
            OpCase("nan_scale", [x, np.array(np.nan, np.float32)]),
        ]


# ------------------------------------------------------------------- DynamicQuantizeLinear


@kernel
def minmax_with_zero(x: Tensor, out: Output):
    """out[0] = min(0, min(x)), out[1] = max(0, max(x))."""
    lo = 0.0
    hi = 0.0
    for i in range(x.size):
        v = x.flat[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo if out.flat == 0 else hi


@helper
def dyn_scale(stats):
    lo = stats.flat[0]
    hi = stats.flat[1]
    return (1.0 if hi == lo else hi - lo) / 255.0


@helper
def dyn_zero_point(stats):
    return round(min(max(0.0 - stats.flat[0] / dyn_scale(stats), 0.0), 255.0))


@kernel
def dyn_scale_out(stats: Tensor, out: Output):
    return dyn_scale(stats)


@kernel
def dyn_zero_point_out(stats: Tensor, out: Output):
    return cast(dyn_zero_point(stats), out.dtype)


@kernel
def dyn_quantize(x: Tensor, stats: Tensor, out: Output):
    v = round(x.flat[out.flat] / dyn_scale(stats)) + dyn_zero_point(stats)
    return cast(saturate(v, 0.0, 255.0), out.dtype)


class DynamicQuantizeLinear(OpDef):
    """uint8 quantisation with scale and zero point from the data's range (including 0)."""

    op_type = "DynamicQuantizeLinear"
    since_version = 11

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None or x.dtype is not DType.float32:
            raise self.fail(node, "input 0 must be a float32 tensor")
        return [TensorInfo(DType.uint8, x.shape), TensorInfo(DType.float32, ()),
                TensorInfo(DType.uint8, ())][: max(len(node.outputs), 1)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0], np.float32)
        lo = np.float32(min(0.0, x.min())) if x.size else np.float32(0)
        hi = np.float32(max(0.0, x.max())) if x.size else np.float32(0)
        if np.isnan(x).any():
            lo = hi = np.float32(np.nan)
        scale = np.float32(1.0 if hi == lo else hi - lo) / np.float32(255)
        zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
        with np.errstate(all="ignore"):
            y = saturate_round(np.rint(x / scale) + zp, DType.uint8)
        return [y, np.array(scale, np.float32),
                saturate_round(np.array(zp), DType.uint8)][: max(len(node.outputs), 1)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        stats = low.temp(DType.float32, (2,))
        low.launch(minmax_with_zero, [In(0)], stats)
        low.launch(dyn_quantize, [In(0), stats], Out(0))
        if len(outputs) > 1:
            low.launch(dyn_scale_out, [stats], Out(1))
        if len(outputs) > 2:
            low.launch(dyn_zero_point_out, [stats], Out(2))
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("mixed", [np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)],
                   n_outputs=3),
            OpCase("positive_only", [np.array([1.0, 2.5, 7.0], np.float32)], n_outputs=3),
            OpCase("negative_only", [np.array([-1.0, -2.5, -7.0], np.float32)], n_outputs=3),
            OpCase("all_zero", [np.zeros((2, 2), np.float32)], n_outputs=3),
            OpCase("size1", [np.array([[5.0]], np.float32)], n_outputs=3),
            OpCase("inf", [np.array([1.0, np.inf, -2.0], np.float32)], n_outputs=3),
        ]


OPS: list[type[OpDef]] = [QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
                          *QUANT_MATMUL_OPS, *QUANT_CONV_OPS]
