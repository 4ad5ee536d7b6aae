"""Miscellaneous ops: BitCast, CumProd, CenterCropPad, Col2Im, TensorScatter (gather
kernels), MaxUnpool and Det (host), plus the host-only ops of ``misc_host`` and the
training optimisers of ``misc_training``."""


from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType, from_numpy, from_onnx
from spawnml.kernel import Output, Tensor, bitcast, cast, kernel, static_range
from spawnml.op import HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import axis_pos, copy_index, input_ints, prod, require_values, row_base, split3, static
from .common import normalize_axis
from .image_decoder import ImageDecoder
from .misc_host import OPS as HOST_OPS
from .misc_kv import Det, MaxUnpool, TensorScatter
from .misc_training import OPS as TRAINING_OPS
from .reduce_index import CumSum

# ---------------------------------------------------------------------------------- BitCast


@kernel
def bitcast_copy(x: Tensor, out: Output):
    """Reinterpret the 32 bits of each element."""
    return bitcast(x.flat[out.flat], out.dtype)


_KERNEL_32 = (DType.float32, DType.int32, DType.uint32)
_NARROW_INT = (DType.int8, DType.uint8, DType.int16, DType.uint16, DType.bool)


class BitCast(OpDef):
    """Reinterpret the bits of each element as another type of the same width. 32-bit types
    bitcast on the device; narrow integers wrap on store; other widths run on the host."""

    op_type = "BitCast"
    since_version = 26

    def _to(self, node: Node, x: TensorInfo | None) -> DType:
        if x is None:
            raise self.fail(node, "input 0 is required")
        to = from_onnx(int(self.attr(node, "to", required=True)))
        if to.bits != x.dtype.bits or "string" in (str(to), str(x.dtype)):
            raise self.fail(node, f"cannot bitcast {x.dtype} to {to}: widths differ")
        return to

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        return [TensorInfo(self._to(node, inputs[0]), inputs[0].shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.array(inputs[0], order="C")  # keeps 0-d shapes
        return [x.view(self._to(node, TensorInfo(from_numpy(x.dtype), x.shape)).numpy)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        src, dst = inputs[0].dtype, self._to(node, inputs[0])
        low = Lowering()
        if src in _KERNEL_32 and dst in _KERNEL_32:
            low.launch(bitcast_copy, [In(0)], Out(0))
        elif src in _NARROW_INT and dst in _NARROW_INT and dst != DType.bool:
            low.launch(copy_index, [In(0)], Out(0))  # same width: the store wraps
        else:
            raise HostOnly(f"{node.describe()}: bitcast {src} -> {dst} has no kernel element "
                           "type pair, so the node runs on the host")
        return low

    def cases(self) -> list[OpCase]:
        f = np.array([[1.0, -2.5, np.inf], [np.nan, 0.0, -0.0]], np.float32)
        return [
            OpCase("f32_to_i32", [f], {"to": 6}),
            OpCase("i32_to_f32", [np.array([1, -1, 1 << 30, 7], np.int32)], {"to": 1}),
            OpCase("u32_to_i32", [np.array([0, 1, 0xFFFFFFFF, 1 << 31], np.uint32)], {"to": 6}),
            OpCase("i8_to_u8", [np.array([-128, -1, 0, 127], np.int8)], {"to": 2}),
            OpCase("u16_to_i16", [np.array([0, 65535, 32768], np.uint16)], {"to": 5}),
            OpCase("bool_to_u8", [np.array([True, False])], {"to": 2}),
            OpCase("f64_to_i64_host", [np.array([1.5, -2.0])], {"to": 7}),
            OpCase("scalar", [np.array(3.0, np.float32)], {"to": 12}),
        ]


# --------------------------------------------------------------------------------- CumProd


@kernel
def cumprod(x: Tensor, out: Output, n: int, inner: int, exclusive: bool, reverse: bool):
    base = row_base(out, n, inner)
    pos = axis_pos(out, n, inner)
    acc = cast(1, out.dtype)  # not x * 0 + 1: that is NaN where x is ±inf
    if reverse:
        for k in range(pos + 1 if exclusive else pos, n):
            acc = acc * x.flat[base + k * inner]
    else:
        for k in range(0, pos if exclusive else pos + 1):
            acc = acc * x.flat[base + k * inner]
    return acc


class CumProd(CumSum):
    op_type = "CumProd"
    since_version = 26

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = self._axis(node, x.ndim, inputs)
        assert axis is not None
        reverse = int(self.attr(node, "reverse", 0))
        v = np.flip(x, axis) if reverse else x
        if int(self.attr(node, "exclusive", 0)) and v.shape[axis]:  # shift by one, from 1
            ones = np.ones_like(np.take(v, [0], axis=axis))
            v = np.concatenate([ones, np.take(v, np.arange(v.shape[axis] - 1), axis=axis)],
                               axis=axis)
        y = np.cumprod(v, axis=axis, dtype=x.dtype)
        return [np.flip(y, axis) if reverse else y]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        axis = self._axis(node, len(shape), values)
        require_values(node, "the axis input", axis)
        assert axis is not None
        _, n, inner = split3(shape, axis)
        low = Lowering()
        low.launch(cumprod, [In(0)], Out(0), n=n, inner=inner,
                   exclusive=bool(self.attr(node, "exclusive", 0)),
                   reverse=bool(self.attr(node, "reverse", 0)))
        return low

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 2.0, -3.0, 0.5], [2.0, 0.0, 4.0, 1.5], [1.0, -1.0, 2.0, 2.0]],
                     np.float32)
        ax = np.array(1, np.int64)
        return [
            OpCase("axis1", [x, ax]),
            OpCase("axis0_int32", [x.astype(np.int32), np.array(0, np.int32)]),
            OpCase("exclusive", [x, ax], {"exclusive": 1}),
            OpCase("reverse", [x, np.array(-1, np.int64)], {"reverse": 1}),
            OpCase("exclusive_reverse", [x, ax], {"exclusive": 1, "reverse": 1}),
            OpCase("int64", [x.astype(np.int64), ax], {"reverse": 1}),
        ]


# --------------------------------------------------------------------------- CenterCropPad


@kernel
def shifted_copy(x: Tensor, out: Output, shift: tuple):
    """out[i] = x[i + shift] where that lies inside x, else 0."""
    off = 0
    ok = True
    for d in static_range(out.ndim):
        i = out.index[d] + shift[d]
        ok = ok and i >= 0 and i < x.shape[d]
        off = off + min(max(i, 0), x.shape[d] - 1) * x.strides[d]
    v = x.flat[off]
    return v if ok else cast(0, out.dtype)


class CenterCropPad(OpDef):
    op_type = "CenterCropPad"
    since_version = 18
    value_inputs = (1,)

    def _target(self, node: Node, inputs, values) -> list[int] | None:
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(inputs) < 2 or inputs[1] is None:
            raise self.fail(node, "inputs input_data (known rank) and shape are required")
        rank = len(x.shape)
        axes = [normalize_axis(node, int(a), rank)
                for a in self.attr(node, "axes", list(range(rank)))]
        want = input_ints(self, node, values, 1)
        if want is None:
            return None
        if len(want) != len(axes):
            raise self.fail(node, f"shape has {len(want)} values for {len(axes)} axes")
        out = list(x.shape)
        for a, s in zip(axes, want):
            out[a] = s
        return out

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        out = self._target(node, inputs, values)
        shape = tuple(out) if out is not None else (None,) * len(inputs[0].shape)
        return [TensorInfo(inputs[0].dtype, shape)]

    @staticmethod
    def _shift(in_dim: int, out_dim: int) -> int:
        """Input index of output index 0 (crop: start inside; pad: start before)."""
        return (in_dim - out_dim) // 2 if in_dim >= out_dim else -((out_dim - in_dim) // 2)

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        x = np.asarray(inputs[0])
        out = self._target(node, array_infos(inputs), inputs)
        assert out is not None
        y = np.zeros(out, x.dtype)
        src, dst = [], []
        for i, o in zip(x.shape, out):
            s = self._shift(i, o)
            lo, hi = max(0, -s), min(o, i - s)
            dst.append(slice(lo, hi))
            src.append(slice(lo + s, hi + s))
        y[tuple(dst)] = x[tuple(src)]
        return [y]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        out = self._target(node, inputs, values)
        require_values(node, "the shape input", out)
        assert out is not None
        shift = tuple(self._shift(i, o) for i, o in zip(static(inputs[0]), out))
        low = Lowering()
        low.launch(shifted_copy, [In(0)], Out(0), shift=shift)
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
        return [
            OpCase("crop_and_pad", [x, np.array([2, 7, 2], np.int64)]),
            OpCase("axes_neg", [x, np.array([1, 8], np.int64)], {"axes": [-2, 0]}),
            OpCase("odd_pad_int", [x.astype(np.int32), np.array([6], np.int64)], {"axes": [2]}),
        ]


# --------------------------------------------------------------------------------- Col2Im


@kernel
def col2im(x: Tensor, out: Output, block: tuple, bstrides: tuple, blocks: tuple,
           bcount: tuple, dil: tuple, pads: tuple, strides: tuple):
    """Sum of every column entry that lands on this image element."""
    nd = len(block)
    chan = out.flat // bcount[1]
    acc = cast(0, out.dtype)
    for kf in range(bcount[0]):
        ok = True
        bflat = 0
        for d in static_range(nd):
            kd = (kf // bstrides[d]) % block[d]
            t = out.index[2 + d] + pads[d] - kd * dil[d]
            q = t // strides[d]
            ok = ok and t >= 0 and t % strides[d] == 0 and q < blocks[d]
            bflat = bflat * blocks[d] + min(max(q, 0), blocks[d] - 1)
        v = x.flat[(chan * bcount[0] + kf) * x.shape[2] + bflat]
        acc = acc + (v if ok else cast(0, out.dtype))
    return acc


class Col2Im(OpDef):
    op_type = "Col2Im"
    since_version = 18
    value_inputs = (1, 2)

    def _geometry(self, node: Node, inputs, values):
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(x.shape) != 3:
            raise self.fail(node, "input must be [N, C * prod(block_shape), L]")
        image, block = input_ints(self, node, values, 1), input_ints(self, node, values, 2)
        if image is None or block is None:
            return None
        nd = len(image)
        dil = list(self.attr(node, "dilations", [1] * nd))
        pads = list(self.attr(node, "pads", [0] * 2 * nd))
        strides = list(self.attr(node, "strides", [1] * nd))
        blocks = [(image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1)
                  // strides[d] + 1 for d in range(nd)]
        k = prod(block)
        if (isinstance(x.shape[1], int) and x.shape[1] % k) or \
                (isinstance(x.shape[2], int) and x.shape[2] != prod(blocks)):
            raise self.fail(node, f"input {x.shape} does not match block_shape {block} and "
                                  f"{prod(blocks)} sliding blocks")
        return image, block, dil, pads, strides, blocks

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        g = self._geometry(node, inputs, values)
        x = inputs[0]
        if g is None:
            return [TensorInfo(x.dtype, None)]
        c = x.shape[1] // prod(g[1]) if isinstance(x.shape[1], int) else None
        return [TensorInfo(x.dtype, (x.shape[0], c, *g[0]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        x = np.asarray(inputs[0])
        image, block, dil, pads, strides, blocks = self._geometry(node, array_infos(inputs),
                                                                  inputs)
        nd = len(image)
        n, ck, _ = x.shape
        cols = x.reshape(n, ck // prod(block), *block, *blocks)
        padded = np.zeros((n, ck // prod(block), *(image[d] + pads[d] + pads[d + nd]
                                                   for d in range(nd))), np.float64)
        for k in np.ndindex(*block):
            dst = tuple(slice(k[d] * dil[d], k[d] * dil[d] + strides[d] * (blocks[d] - 1) + 1,
                              strides[d]) for d in range(nd))
            padded[(slice(None), slice(None), *dst)] += cols[(slice(None), slice(None), *k)]
        crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(nd))
        return [padded[(slice(None), slice(None), *crop)].astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._geometry(node, inputs, values)
        require_values(node, "image_shape and block_shape", g)
        image, block, dil, pads, strides, blocks = g
        nd = len(image)
        bstrides = tuple(prod(block[d + 1:]) for d in range(nd))
        low = Lowering()
        low.launch(col2im, [In(0)], Out(0), block=tuple(block), bstrides=bstrides,
                   blocks=tuple(blocks), bcount=(prod(block), prod(image)), dil=tuple(dil),
                   pads=tuple(pads[:nd]), strides=tuple(strides))
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(13)
        x = rng.standard_normal((1, 5 * 4, 12)).astype(np.float32)
        i64 = np.int64
        return [
            OpCase("basic", [rng.standard_normal((1, 5, 5)).astype(np.float32),
                             np.array([5, 5], i64), np.array([1, 5], i64)]),
            OpCase("strides_pads_dilations", [x, np.array([5, 7], i64), np.array([2, 2], i64)],
                   {"strides": [2, 2], "pads": [1, 1, 0, 1], "dilations": [1, 2]}),
            OpCase("3d", [rng.standard_normal((2, 3 * 8, 8)).astype(np.float32),
                          np.array([3, 3, 3], i64), np.array([2, 2, 2], i64)]),
        ]


OPS: list[type[OpDef]] = [BitCast, CumProd, CenterCropPad, Col2Im, TensorScatter, MaxUnpool,
                          Det, ImageDecoder, *HOST_OPS, *TRAINING_OPS]
