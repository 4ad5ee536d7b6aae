"""Pooling: MaxPool (with Indices), AveragePool, LpPool and their Global forms, 1-D..3-D.

One rank-generic kernel (three left-padded spatial dims) computes max, average or Lp over
each window; its tap loops have compile-time bounds and only accumulate, so the cpu
backend evaluates a whole window at once.
"""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, i64, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import static_shape
from .conv_common import (
    FLOATS,
    Window,
    array_infos,
    ints_attr,
    pad3,
    pad_mask,
    sliding_windows,
    spatial_index,
    spatial_input,
    window,
)

MAX, AVG, LP = 0, 1, 2
MAX_DTYPES = (*FLOATS, DType.int8, DType.uint8)


@kernel
def pool_nd(
    x: Tensor, out: Output, nsp: int, xsp: tuple, ksp: tuple, strides: tuple, pads: tuple,
    pads_end: tuple, dil: tuple, mode: int, include_pad: bool, p: float, lowest: float,
    fp: bool,
):
    """mode 0 max (NaN taps skipped; NaN when every tap is), 1 average, 2 Lp (p) over one
    window; pads beyond the input are skipped (average counts them when ``include_pad``,
    never the ceil_mode area)."""
    xb = out.index[0] * x.strides[0] + out.index[1] * x.strides[1]
    sz = xsp[1] * xsp[2]
    sy = xsp[2]
    oz = spatial_index(out, 0, nsp) * strides[0] - pads[0]
    oy = spatial_index(out, 1, nsp) * strides[1] - pads[1]
    ox = spatial_index(out, 2, nsp) * strides[2] - pads[2]
    if mode == 0:
        # NaN taps are skipped (NaN when every tap is; onnx.reference agrees without pads,
        # onnxruntime's answer depends on the order of its SIMD max). max propagates NaN, so
        # the fast loop is a plain max, and a NaN result takes the window again, skipping.
        best = cast(lowest, out.dtype)
        for kz in range(ksp[0]):
            iz = oz + kz * dil[0]
            for ky in range(ksp[1]):
                iy = oy + ky * dil[1]
                for kx in range(ksp[2]):
                    ix = ox + kx * dil[2]
                    if 0 <= iz < xsp[0] and 0 <= iy < xsp[1] and 0 <= ix < xsp[2]:
                        best = max(best, x.flat[xb + iz * sz + iy * sy + ix])
        if fp:
            if isnan(best):
                best = cast(lowest, out.dtype)
                real = False  # a tap that is not NaN
                # its own names: a register tile shares the fast loop's variables only
                # where no copy assigns them under a condition of its own
                for nz in range(ksp[0]):
                    jz = oz + nz * dil[0]
                    for ny in range(ksp[1]):
                        jy = oy + ny * dil[1]
                        for nx in range(ksp[2]):
                            jx = ox + nx * dil[2]
                            if 0 <= jz < xsp[0] and 0 <= jy < xsp[1] and 0 <= jx < xsp[2]:
                                v = x.flat[xb + jz * sz + jy * sy + jx]
                                if not isnan(v):
                                    real = True
                                    best = max(best, v)
                if not real:
                    best = cast(math.nan, out.dtype)
        return best
    acc = 0.0
    count = 0.0
    for kz in range(ksp[0]):
        iz = oz + kz * dil[0]
        for ky in range(ksp[1]):
            iy = oy + ky * dil[1]
            for kx in range(ksp[2]):
                ix = ox + kx * dil[2]
                if 0 <= iz < xsp[0] and 0 <= iy < xsp[1] and 0 <= ix < xsp[2]:
                    v = cast(x.flat[xb + iz * sz + iy * sy + ix], f32)
                    if mode == 1:
                        acc = acc + v
                    elif p == 1.0:
                        acc = acc + abs(v)
                    elif p == 2.0:
                        acc = acc + v * v
                    else:
                        acc = acc + pow(abs(v), p)
                if mode == 1 and include_pad:
                    if (
                        -pads[0] <= iz < xsp[0] + pads_end[0]
                        and -pads[1] <= iy < xsp[1] + pads_end[1]
                        and -pads[2] <= ix < xsp[2] + pads_end[2]
                    ):
                        count = count + 1.0
                elif mode == 1:
                    if 0 <= iz < xsp[0] and 0 <= iy < xsp[1] and 0 <= ix < xsp[2]:
                        count = count + 1.0
    if mode == 1:
        return cast(acc / count, out.dtype)
    if p == 1.0:
        return cast(acc, out.dtype)
    if p == 2.0:
        return cast(sqrt(acc), out.dtype)
    return cast(pow(acc, 1.0 / p), out.dtype)


@kernel
def max_pool_indices(
    x: Tensor, out: Output, nsp: int, xsp: tuple, ksp: tuple, strides: tuple, pads: tuple,
    dil: tuple, column_major: bool, lowest: float, fp: bool,
):
    """MaxPool's Indices output: flat index of the (first) maximum, spatial dims row- or
    column-major."""
    plane = out.index[0] * x.strides[0] + out.index[1] * x.strides[1]
    oz = spatial_index(out, 0, nsp) * strides[0] - pads[0]
    oy = spatial_index(out, 1, nsp) * strides[1] - pads[1]
    ox = spatial_index(out, 2, nsp) * strides[2] - pads[2]
    best = cast(lowest, x.dtype)
    found = cast(-1, i64)
    for kz in range(ksp[0]):
        iz = oz + kz * dil[0]
        for ky in range(ksp[1]):
            iy = oy + ky * dil[1]
            for kx in range(ksp[2]):
                ix = ox + kx * dil[2]
                if 0 <= iz < xsp[0] and 0 <= iy < xsp[1] and 0 <= ix < xsp[2]:
                    v = x.flat[plane + (iz * xsp[1] + iy) * xsp[2] + ix]
                    if (v > best or found < 0) and not (fp and isnan(v)):
                        best = v
                        if column_major:
                            found = cast(plane + iz + (iy + ix * xsp[1]) * xsp[0], i64)
                        else:
                            found = cast(plane + (iz * xsp[1] + iy) * xsp[2] + ix, i64)
    return found


@kernel
def global_pool(x: Tensor, out: Output, size: int, mode: int, p: float, lowest: float,
                fp: bool):
    """Global max (NaN skipped unless all are, as onnxruntime) / average / Lp over each
    (n, c) plane of ``size`` contiguous elements."""
    base = out.flat * size
    if mode == 0:
        if size == 0:
            return cast(lowest, out.dtype)
        best = x.flat[base]
        for k in range(1, size):
            v = x.flat[base + k]
            if fp:
                best = v if isnan(best) or v > best else best
            else:
                best = max(best, v)
        return best
    acc = 0.0
    for k in range(size):
        v = cast(x.flat[base + k], f32)
        if mode == 1:
            acc = acc + v
        elif p == 2.0:
            acc = acc + v * v
        else:
            acc = acc + pow(abs(v), p)
    if mode == 1:
        return cast(acc / cast(size, f32), out.dtype)
    if p == 2.0:
        return cast(sqrt(acc), out.dtype)
    return cast(pow(acc, 1.0 / p), out.dtype)


def lowest_value(dtype: DType) -> float | int:
    """The identity of max for this dtype (what padding never beats)."""
    if dtype.is_int:
        return int(np.iinfo(dtype.numpy).min)
    return -math.inf


def _flag(op: OpDef, node: Node, name: str) -> bool:
    value = int(op.attr(node, name, 0))
    if value not in (0, 1):
        raise op.fail(node, f"attribute {name!r} = {value} must be 0 or 1")
    return bool(value)


class _Pool(OpDef):
    """MaxPool / AveragePool / LpPool: attribute checks, geometry, reference, lowering."""

    since_version = 1
    mode: int
    dtypes: Sequence[DType] = FLOATS

    def _p(self, node: Node) -> float:
        return 1.0

    def _window(self, node: Node, inputs) -> tuple[tuple[int, ...], Window]:
        x_shape = spatial_input(self, node, inputs[0], self.dtypes)
        nsp = len(x_shape) - 2
        if "kernel_shape" not in node.attrs:
            raise self.fail(node, "missing required attribute 'kernel_shape'")
        kernel = ints_attr(self, node, "kernel_shape", nsp, 1, minimum=1)
        ceil_mode = _flag(self, node, "ceil_mode")
        win = window(self, node, x_shape[2:], kernel, ceil_mode=ceil_mode)
        if any(b >= e for b, e in zip(win.pads_begin + win.pads_end, win.extent * 2)):
            raise self.fail(node, f"attribute 'pads' = {list(win.pads_begin + win.pads_end)} "
                                  f"must be smaller than the window {list(win.extent)}")
        return x_shape, win

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x_shape, win = self._window(node, inputs)
        self._p(node)
        info = TensorInfo(inputs[0].dtype, (*x_shape[:2], *win.out))
        if self.mode == MAX and len(node.outputs) > 1 and node.outputs[1]:
            _flag(self, node, "storage_order")
            return [info, TensorInfo(DType.int64, info.shape)]
        return [info]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        x_shape, win = self._window(node, array_infos(inputs))
        ins = x_shape[2:]
        nsp = len(ins)
        axes = tuple(range(2 + nsp, 2 + 2 * nsp))
        taps = sliding_windows(x, win, 0)
        inside = pad_mask(ins, win, include_pad=False)
        if self.mode == MAX:
            lowest = np.asarray(lowest_value(DType(str(x.dtype))), x.dtype)
            all_nan = None
            if x.dtype.kind == "f":  # NaN taps skipped, NaN when all are (onnxruntime)
                nan = inside & np.isnan(taps)
                inside = inside & ~nan
                all_nan = nan.any(axis=axes) & ~inside.any(axis=axes)
            y = np.where(inside, taps, lowest).max(axis=axes)
            if all_nan is not None:
                y = np.where(all_nan, np.nan, y)
            outs = [y.astype(x.dtype)]
            if len(node.outputs) > 1 and node.outputs[1]:
                outs.append(self._indices(node, x, win, taps, inside, axes))
            return outs
        t = taps.astype(np.float64)
        if self.mode == AVG:
            include = _flag(self, node, "count_include_pad")
            count = pad_mask(ins, win, include_pad=include).sum(axis=tuple(range(nsp, 2 * nsp)))
            y = np.where(inside, t, 0.0).sum(axis=axes) / count
        else:
            p = self._p(node)
            y = (np.where(inside, np.abs(t) ** p, 0.0).sum(axis=axes)) ** (1.0 / p)
        return [y.astype(x.dtype)]

    def _indices(self, node, x, win, taps, inside, axes) -> np.ndarray:
        """Flat index of the first maximal tap (row-major, or column-major spatial)."""
        nsp = len(win.kernel)
        n, c = x.shape[:2]
        flat_taps = np.where(inside, taps, -np.inf).reshape(n, c, *win.out, -1)
        first = np.argmax(flat_taps, axis=-1)
        k_idx = np.unravel_index(first, win.kernel)
        pos = []
        for d in range(nsp):
            o = np.arange(win.out[d]).reshape([-1 if i == d else 1 for i in range(nsp)])
            pos.append(o * win.strides[d] - win.pads_begin[d] + k_idx[d] * win.dilations[d])
        ins = x.shape[2:]
        if int(self.attr(node, "storage_order", 0)):
            spatial = sum(pos[d] * int(np.prod(ins[:d])) for d in range(nsp))
        else:
            spatial = sum(pos[d] * int(np.prod(ins[d + 1:])) for d in range(nsp))
        plane = np.arange(n * c).reshape(n, c, *([1] * nsp)) * int(np.prod(ins))
        return (plane + spatial).astype(np.int64)

    def lower(self, node, inputs, outputs, values) -> Lowering:
        x_shape, win = self._window(node, inputs)
        geometry = dict(
            nsp=len(x_shape) - 2,
            xsp=pad3(x_shape[2:], 1),
            ksp=pad3(win.kernel, 1),
            strides=pad3(win.strides, 1),
            pads=pad3(win.pads_begin, 0),
            dil=pad3(win.dilations, 1),
        )
        lowest = lowest_value(inputs[0].dtype)
        fp = inputs[0].dtype.is_float
        low = Lowering()
        include = self.mode == AVG and _flag(self, node, "count_include_pad")
        low.launch(pool_nd, [In(0)], Out(0), **geometry, pads_end=pad3(win.pads_end, 0),
                   mode=self.mode, include_pad=include, p=float(self._p(node)), lowest=lowest,
                   fp=fp)
        if len(outputs) > 1:
            low.launch(max_pool_indices, [In(0)], Out(1), **geometry, lowest=lowest, fp=fp,
                       column_major=bool(self.attr(node, "storage_order", 0)))
        return low


def _rand(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class MaxPool(_Pool):
    op_type = "MaxPool"
    mode = MAX
    dtypes = MAX_DTYPES

    def cases(self) -> list[OpCase]:
        x = _rand(0, 1, 2, 7, 6)
        nan = x.copy()
        nan[0, 0, 1, 1], nan[0, 1, 2, 2] = np.nan, -np.inf
        u8 = np.random.default_rng(3).integers(0, 255, (1, 1, 5, 5)).astype(np.uint8)
        big = _rand(5, 1, 3, 20, 22)  # large enough for register tiles, with NaN windows
        big[0, 0, 0:2, 0:2] = np.nan  # the corner window (with its padding): every tap NaN
        big[0, 1, 9:12, 9:12] = np.nan  # an interior window all NaN, its neighbours partly
        big[0, 2, 5, ::3] = np.nan  # single NaN taps along a row
        big[0, 2, 15, 4] = -np.inf
        return [
            OpCase("max1d", [_rand(1, 2, 3, 9)], {"kernel_shape": (3,), "strides": (2,)}),
            OpCase("max2d_pads_ceil", [x], {"kernel_shape": (3, 2), "strides": (2, 2),
                                            "pads": (1, 0, 1, 1), "ceil_mode": 1}),
            OpCase("max2d_dilations", [x], {"kernel_shape": (2, 2), "dilations": (2, 3)}),
            OpCase("max2d_same_lower", [x], {"kernel_shape": (3, 3), "strides": (2, 2),
                                             "auto_pad": "SAME_LOWER"}),
            OpCase("max2d_indices", [x], {"kernel_shape": (2, 3), "pads": (1, 1, 1, 1)},
                   n_outputs=2),
            OpCase("max2d_indices_asym_pads", [x], {"kernel_shape": (2, 3),
                                                    "pads": (1, 1, 0, 1)}, n_outputs=2),
            OpCase("max2d_indices_col_major", [x], {"kernel_shape": (2, 2), "strides": (2, 2),
                                                    "storage_order": 1}, n_outputs=2),
            OpCase("max3d_indices", [_rand(2, 1, 1, 4, 3, 5)],
                   {"kernel_shape": (2, 2, 2), "storage_order": 1}, n_outputs=2),
            OpCase("max2d_nan_inf", [nan], {"kernel_shape": (2, 2)}),
            OpCase("max2d_nan_windows_tiled", [big], {"kernel_shape": (3, 3), "strides": (2, 2),
                                                      "pads": (1, 1, 1, 1)}),
            OpCase("max2d_nan_windows_stride1", [big], {"kernel_shape": (3, 3),
                                                        "pads": (1, 1, 1, 1)}),
            OpCase("max2d_uint8", [u8], {"kernel_shape": (2, 2), "pads": (1, 1, 1, 1)}),
            OpCase("max2d_size1", [_rand(4, 1, 1, 1, 1)], {"kernel_shape": (1, 1)}),
        ]


class AveragePool(_Pool):
    op_type = "AveragePool"
    mode = AVG

    def cases(self) -> list[OpCase]:
        x = _rand(5, 2, 2, 7, 6)
        return [
            OpCase("avg1d", [_rand(6, 1, 2, 8)], {"kernel_shape": (3,)}),
            OpCase("avg2d_pads_exclude", [x], {"kernel_shape": (3, 3), "pads": (1, 1, 2, 1)}),
            OpCase("avg2d_pads_include", [x], {"kernel_shape": (3, 3), "pads": (1, 1, 2, 1),
                                               "count_include_pad": 1}),
            OpCase("avg2d_ceil_include", [x], {"kernel_shape": (3, 3), "strides": (2, 2),
                                               "pads": (1, 1, 1, 1), "ceil_mode": 1,
                                               "count_include_pad": 1}),
            OpCase("avg2d_same_upper", [x], {"kernel_shape": (2, 3), "strides": (2, 1),
                                             "auto_pad": "SAME_UPPER"}),
            OpCase("avg2d_dilations", [x], {"kernel_shape": (2, 2), "dilations": (2, 2),
                                            "ceil_mode": 1}, opset=19),
            OpCase("avg3d", [_rand(7, 1, 1, 4, 4, 4)], {"kernel_shape": (2, 3, 2),
                                                        "strides": (2, 1, 2)}),
            OpCase("avg2d_size1", [_rand(8, 1, 1, 1, 1)], {"kernel_shape": (1, 1)}),
        ]


class LpPool(_Pool):
    op_type = "LpPool"
    mode = LP

    def _p(self, node: Node) -> float:
        p = float(self.attr(node, "p", 2))
        if p <= 0:
            raise self.fail(node, f"attribute 'p' = {p} must be positive")
        return p

    def cases(self) -> list[OpCase]:
        x = _rand(9, 1, 2, 6, 5)
        return [
            OpCase("lp2d_p2", [x], {"kernel_shape": (2, 2)}),
            OpCase("lp2d_p1_pads", [x], {"kernel_shape": (3, 2), "p": 1, "pads": (1, 0, 1, 1)}),
            OpCase("lp2d_p3_strides", [x], {"kernel_shape": (2, 2), "p": 3, "strides": (2, 2)},
                   rtol=1e-4),
            OpCase("lp1d", [_rand(10, 1, 1, 7)], {"kernel_shape": (3,), "auto_pad": "SAME_UPPER"}),
        ]


class _GlobalPool(OpDef):
    since_version = 1
    mode: int
    dtypes: Sequence[DType] = FLOATS

    def _p(self, node: Node) -> float:
        return 1.0

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0]
        if x is None or x.dtype not in self.dtypes:
            raise self.fail(node, f"input X must be one of {[str(d) for d in self.dtypes]}")
        if x.shape is None or len(x.shape) < 3:
            raise self.fail(node, f"input X must have rank >= 3, got {x.shape}")
        self._p(node)
        return [TensorInfo(x.dtype, (*x.shape[:2], *([1] * (len(x.shape) - 2))))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = inputs[0]
        axes = tuple(range(2, x.ndim))
        if self.mode == MAX:  # NaN skipped unless all are (onnxruntime's GlobalMaxPool)
            return [np.fmax.reduce(x, axis=axes, keepdims=True)]
        t = x.astype(np.float64)
        if self.mode == AVG:
            return [t.mean(axis=axes, keepdims=True).astype(x.dtype)]
        p = self._p(node)
        return [((np.abs(t) ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape = static_shape(inputs[0])
        low = Lowering()
        low.launch(global_pool, [In(0)], Out(0), size=int(np.prod(shape[2:])), mode=self.mode,
                   p=float(self._p(node)), lowest=lowest_value(inputs[0].dtype),
                   fp=inputs[0].dtype.is_float)
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(11, 2, 3, 5, 4)
        nan = x.copy()
        nan[0, 1, 2, 2] = np.nan
        nan[1, 2, 0, 0] = np.inf
        return [OpCase("global2d", [x]), OpCase("global1d", [_rand(12, 1, 2, 7)]),
                OpCase("global3d", [_rand(13, 1, 2, 3, 2, 2)]),
                OpCase("global_size1", [_rand(14, 1, 1, 1, 1)]),
                OpCase("global_nan_inf", [nan])]


class GlobalMaxPool(_GlobalPool):
    op_type = "GlobalMaxPool"
    mode = MAX
    dtypes = MAX_DTYPES


class GlobalAveragePool(_GlobalPool):
    op_type = "GlobalAveragePool"
    mode = AVG


class GlobalLpPool(_GlobalPool):
    op_type = "GlobalLpPool"
    since_version = 2
    mode = LP

    def _p(self, node: Node) -> float:
        p = float(self.attr(node, "p", 2))
        if p <= 0:
            raise self.fail(node, f"attribute 'p' = {p} must be positive")
        return p


OPS: list[type[OpDef]] = [MaxPool, AveragePool, LpPool, GlobalMaxPool, GlobalAveragePool,
                          GlobalLpPool]
