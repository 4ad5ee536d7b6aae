"""Integer convolutions: ConvInteger (int32 accumulation) and QLinearConv (the same
accumulation plus bias, requantised in a second launch). N-d, grouped, padded, strided,
dilated; padding contributes nothing (it stands for the zero point)."""


from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.kernel import Output, Tensor, cast, f32, i32, kernel, static_range
from spawnml.op import Data, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .quant_common import QRANGES, ZERO, requant_scale, saturate, saturate_round, zero_or

_INT8 = (DType.uint8, DType.int8)


@dataclass(frozen=True)
class ConvGeometry:
    out_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]  # begins only (ends follow from the output size)
    group: int


def conv_geometry(op: OpDef, node: Node, x: tuple, w: tuple) -> ConvGeometry:
    """ONNX Conv output shape and padding (auto_pad NOTSET/VALID/SAME_UPPER/SAME_LOWER)."""
    if len(x) < 3 or len(w) != len(x):
        raise op.fail(node, f"X must be (N, C, D1, ...) and W of the same rank, got {x}, {w}")
    sp = len(x) - 2
    kernel = tuple(int(k) for k in op.attr(node, "kernel_shape", w[2:]))
    strides = tuple(int(s) for s in op.attr(node, "strides", (1,) * sp))
    dil = tuple(int(d) for d in op.attr(node, "dilations", (1,) * sp))
    pads = tuple(int(p) for p in op.attr(node, "pads", (0,) * (2 * sp)))
    group = int(op.attr(node, "group", 1))
    auto_pad = op.attr(node, "auto_pad", "NOTSET")
    if len(kernel) != sp or len(strides) != sp or len(dil) != sp or len(pads) != 2 * sp:
        raise op.fail(node, "kernel_shape/strides/dilations/pads do not match the spatial rank")
    if tuple(kernel) != tuple(w[2:]):
        raise op.fail(node, f"kernel_shape {kernel} differs from W's {tuple(w[2:])}")
    if min(strides + dil) < 1 or min(pads) < 0 or group < 1:
        raise op.fail(node, "strides/dilations must be >= 1, pads >= 0, group >= 1")
    if x[1] != w[1] * group or w[0] % group:
        raise op.fail(node, f"channels: X has {x[1]}, W {w[1]} per group x {group} groups, "
                            f"{w[0]} outputs")
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dil))
    inp = tuple(int(v) for v in x[2:])
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-i // s) for i, s in zip(inp, strides))
        total = [max((o - 1) * s + k - i, 0) for o, s, k, i in zip(out, strides, span, inp)]
        begins = tuple(t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total)
    elif auto_pad == "VALID":
        out = tuple((i - k) // s + 1 for i, k, s in zip(inp, span, strides))
        begins = (0,) * sp
    elif auto_pad == "NOTSET":
        out = tuple((i + pads[d] + pads[d + sp] - span[d]) // strides[d] + 1
                    for d, i in enumerate(inp))
        begins = pads[:sp]
    else:
        raise op.fail(node, f"unknown auto_pad {auto_pad!r}")
    if min(out) < 1:
        raise op.fail(node, f"the kernel {kernel} does not fit the input {inp}")
    return ConvGeometry((int(x[0]), int(w[0]), *out), kernel, strides, dil, begins, group)


def conv_int_reference(x, w, xzp, wzp, geo: ConvGeometry) -> np.ndarray:
    """Grouped N-d convolution of (x - xzp) and (w - wzp), int64 then int32."""
    x64 = np.asarray(x).astype(np.int64) - (0 if xzp is None else np.asarray(xzp).astype(np.int64))
    w64 = np.asarray(w).astype(np.int64)
    if wzp is not None:
        z = np.asarray(wzp).astype(np.int64)
        w64 = w64 - (z.reshape((-1,) + (1,) * (w64.ndim - 1)) if z.size > 1 else z.reshape(()))
    ends = [max((o - 1) * s + (k - 1) * d + 1 - i - b, 0) for o, s, k, d, i, b in zip(
        geo.out_shape[2:], geo.strides, geo.kernel, geo.dilations, x64.shape[2:], geo.pads)]
    xp = np.pad(x64, [(0, 0), (0, 0), *zip(geo.pads, ends)])
    m = geo.out_shape[1]
    cg, mg = w64.shape[1], m // geo.group
    y = np.zeros(geo.out_shape, np.int64)
    for kpos in itertools.product(*(range(k) for k in geo.kernel)):
        sl = tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, o, s in zip(
            kpos, geo.dilations, geo.out_shape[2:], geo.strides))
        patch = xp[(slice(None), slice(None), *sl)]
        for g in range(geo.group):
            wk = w64[(slice(g * mg, (g + 1) * mg), slice(None), *kpos)]
            y[:, g * mg:(g + 1) * mg] += np.einsum(
                "nc...,mc->nm...", patch[:, g * cg:(g + 1) * cg], wk)
    return y.astype(np.int32)


@kernel
def conv_integer(x: Tensor, w: Tensor, xzp: Tensor, wzp: Tensor, out: Output, kshape: tuple,
                 kstrides: tuple, strides: tuple, dilations: tuple, pads: tuple, group: int):
    n = out.index[0]
    m = out.index[1]
    cg = w.shape[1]
    g = m // (w.shape[0] // group)
    zx = cast(xzp.flat[0], i32)
    zw = cast(wzp.flat[0 if wzp.size == 1 else m], i32)
    acc = 0
    for c in range(cg):
        base = n * x.strides[0] + (g * cg + c) * x.strides[1]
        for kk in range(w.strides[1]):
            off = base
            inside = True
            for d in static_range(len(kshape)):
                tap = (kk // kstrides[d]) % kshape[d]
                pos = out.index[2 + d] * strides[d] - pads[d] + tap * dilations[d]
                inside = inside and pos >= 0 and pos < x.shape[2 + d]
                off = off + min(max(pos, 0), x.shape[2 + d] - 1) * x.strides[2 + d]
            wv = cast(w.flat[m * w.strides[0] + c * w.strides[1] + kk], i32) - zw
            acc = acc + ((cast(x.flat[off], i32) - zx) * wv if inside else 0)
    return acc


@kernel
def requantize_conv(acc: Tensor, bias: Tensor, sx: Tensor, sw: Tensor, sy: Tensor, zy: Tensor,
                    out: Output, lo: float, hi: float):
    m = out.index[1]
    total = acc.flat[out.flat] + cast(bias.flat[0 if bias.size == 1 else m], i32)
    scale = requant_scale(sx.flat[0], sw.flat[0 if sw.size == 1 else m], sy.flat[0])
    v = round(cast(total, f32) * scale) + cast(zy.flat[0], f32)
    return cast(saturate(v, lo, hi), out.dtype)


def _conv_consts(geo: ConvGeometry) -> dict:
    kstrides = tuple(int(np.prod(geo.kernel[d + 1:])) for d in range(len(geo.kernel)))
    return {"kshape": geo.kernel, "kstrides": kstrides, "strides": geo.strides,
            "dilations": geo.dilations, "pads": geo.pads, "group": geo.group}


class IntConvOp(OpDef):
    since_version = 10
    x_index, w_index, xzp_index, wzp_index = 0, 1, 2, 3

    def geometry(self, node: Node, inputs) -> ConvGeometry | None:
        x, w = inputs[self.x_index], inputs[self.w_index]
        if x.shape is None or w.shape is None or not (x.is_static and w.is_static):
            return None
        return conv_geometry(self, node, x.shape, w.shape)

    def check_zero_points(self, node: Node, inputs, m: int | None) -> None:
        for zi, qi in ((self.xzp_index, self.x_index), (self.wzp_index, self.w_index)):
            z = inputs[zi] if len(inputs) > zi else None
            if z is None:
                continue
            if z.dtype is not inputs[qi].dtype:
                raise self.fail(node, f"zero point (input {zi}) must match input {qi}'s dtype")
            if z.shape is not None and int(np.prod([d if isinstance(d, int) else 2
                                                    for d in z.shape])) != 1:
                if zi == self.xzp_index or len(z.shape) != 1 or z.shape[0] != m:
                    raise self.fail(node, f"zero point (input {zi}) must be per-tensor"
                                          + ("" if zi == self.xzp_index else
                                             f" or a vector of the {m} output channels"))

    @staticmethod
    def opt(inputs, i):
        return inputs[i] if len(inputs) > i else None


class ConvInteger(IntConvOp):
    """Convolution of (u)int8 tensors minus zero points, accumulated in int32."""

    op_type = "ConvInteger"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs x, w[, x_zero_point, w_zero_point]")
        for i, info in enumerate(inputs[:2]):
            if info.dtype not in _INT8:
                raise self.fail(node, f"input {i} must be uint8/int8, got {info.dtype}")
        self.check_zero_points(node, inputs, inputs[1].shape[0] if inputs[1].shape else None)
        geo = self.geometry(node, inputs)
        return [TensorInfo(DType.int32, None if geo is None else geo.out_shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, w = np.asarray(inputs[0]), np.asarray(inputs[1])
        geo = conv_geometry(self, node, x.shape, w.shape)
        return [conv_int_reference(x, w, self.opt(inputs, 2), self.opt(inputs, 3), geo)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        geo = self.geometry(node, inputs)
        low = Lowering()
        zx = In(2) if self.opt(inputs, 2) is not None else None
        zw = In(3) if self.opt(inputs, 3) is not None else None
        low.launch(conv_integer, [In(0), In(1), zero_or(zx), zero_or(zw)], Out(0),
                   **_conv_consts(geo))  # type: ignore[arg-type]
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(2)
        x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
        w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
        wg = rng.integers(-128, 128, (4, 1, 2, 2)).astype(np.int8)
        xi8 = rng.integers(-128, 128, (2, 2, 6)).astype(np.int8)
        w1d = rng.integers(-128, 128, (2, 2, 3)).astype(np.int8)
        zx, zw = np.array(100, np.uint8), np.array(120, np.uint8)
        return [
            OpCase("basic", [x, w, zx, zw]),
            OpCase("padding", [x, w, zx, zw], {"pads": (1, 2, 1, 0)}),
            OpCase("strides_dilations", [x, w, zx], {"strides": (2, 1), "dilations": (1, 2)}),
            OpCase("same_upper", [x, w, zx, zw], {"auto_pad": "SAME_UPPER", "strides": (2, 2)}),
            OpCase("same_lower", [x, w], {"auto_pad": "SAME_LOWER"}),
            OpCase("valid", [x, w], {"auto_pad": "VALID", "strides": (2, 2)}),
            OpCase("grouped_per_channel_zp", [x.astype(np.int8), wg, np.array(-5, np.int8),
                                              np.array([1, -2, 3, 0], np.int8)], {"group": 2}),
            OpCase("conv1d", [xi8, w1d], {"pads": (1, 1)}),
            OpCase("size1", [x[:, :, :1, :1], w[:1, :, :1, :1]]),
        ]


class QLinearConv(IntConvOp):
    """Quantised convolution: saturate(round((acc + B) * sx * sw / sy) + zy)."""

    op_type = "QLinearConv"
    x_index, w_index, xzp_index, wzp_index = 0, 3, 2, 5

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 8 or any(i is None for i in inputs[:8]):
            raise self.fail(node, "expects x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]")
        x, sx, _, w, sw, _, sy, zy = inputs[:8]
        for name, q in (("x", x), ("w", w), ("y_zero_point", zy)):
            if q.dtype not in _INT8:
                raise self.fail(node, f"{name} must be uint8/int8, got {q.dtype}")
        m = w.shape[0] if w.shape else None
        self.check_zero_points(node, inputs, m)
        for name, s in (("x_scale", sx), ("w_scale", sw), ("y_scale", sy)):
            if s.dtype is not DType.float32:
                raise self.fail(node, f"{name} must be float32, got {s.dtype}")
            if s.shape and int(np.prod([d if isinstance(d, int) else 2 for d in s.shape])) != 1 \
                    and (name != "w_scale" or len(s.shape) != 1 or s.shape[0] != m):
                raise self.fail(node, f"{name} has an invalid shape {s.shape}")
        b = self.opt(inputs, 8)
        if b is not None and (b.dtype is not DType.int32 or (b.shape and tuple(b.shape) != (m,))):
            raise self.fail(node, f"B must be int32 of shape ({m},), got {b.dtype} {b.shape}")
        geo = self.geometry(node, inputs)
        return [TensorInfo(zy.dtype, None if geo is None else geo.out_shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, sx, zx, w, sw, zw, sy, zy = (np.asarray(a) for a in inputs[:8])
        geo = conv_geometry(self, node, x.shape, w.shape)
        acc = conv_int_reference(x, w, zx, zw, geo).astype(np.int64)
        shape_c = (1, -1) + (1,) * (acc.ndim - 2)
        b = self.opt(inputs, 8)
        if b is not None:
            acc = acc + np.asarray(b).astype(np.int64).reshape(shape_c)
        scale = (sx.astype(np.float32).reshape(()) * sw.astype(np.float32).reshape(
            shape_c if sw.size > 1 else ())) / sy.astype(np.float32).reshape(())
        v = np.rint(acc.astype(np.int32).astype(np.float32) * scale) + zy.astype(np.float32)
        return [saturate_round(v, as_dtype(zy.dtype))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        geo = self.geometry(node, inputs)
        low = Lowering()
        acc = low.temp(DType.int32, outputs[0].shape)  # type: ignore[arg-type]
        low.launch(conv_integer, [In(0), In(3), In(2), In(5)], acc, **_conv_consts(geo))  # type: ignore[arg-type]
        lo, hi = QRANGES[outputs[0].dtype]
        bias = In(8) if self.opt(inputs, 8) is not None else Data(ZERO)
        low.launch(requantize_conv, [acc, bias, In(1), In(4), In(6), In(7)], Out(0),
                   lo=float(lo), hi=float(hi))
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(3)
        x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
        w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)

        def args(x, w, sw=0.004, zdt=np.uint8, bias=None):
            a = [x, np.array(0.02, np.float32), np.array(110, x.dtype), w,
                 np.asarray(sw, np.float32), np.array(120, w.dtype),
                 np.array(0.5, np.float32), np.array(90, zdt)]
            return a + ([] if bias is None else [bias])

        xi, wi = x.astype(np.int8), w.astype(np.int8)
        return [
            OpCase("basic", args(x, w), atol=1),
            OpCase("bias_padding", args(x, w, bias=np.array([-500, 0, 900], np.int32)),
                   {"pads": (1, 1, 1, 1)}, atol=1),
            OpCase("per_channel_scale", args(x, w, sw=[0.001, 0.01, 0.1]),
                   {"strides": (2, 2)}, atol=1),
            OpCase("int8", args(xi, wi, zdt=np.int8), {"auto_pad": "SAME_UPPER"}, atol=1),
            OpCase("saturating", args(x, w, sw=1.0), atol=1),
        ]


QUANT_CONV_OPS: list[type[OpDef]] = [ConvInteger, QLinearConv]
