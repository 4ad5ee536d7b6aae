"""Resize (opsets 10-19) and the deprecated Upsample (7-9).

Interpolation is separable, so a resize is one 1-D pass per changed axis (see
``resize_taps``): the host computes each pass's taps and weights, uploaded as constants;
a generic kernel applies them. Intermediate passes are float32 temporaries; the final pass
rounds and saturates into integer outputs as ONNX does.
"""


from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, helper, kernel, static_range
from spawnml.op import Data, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo, Tmp

from .axes import copy_index, has_input, kernel_dtype, norm_axes, rank_of, require_values, static
from .resize_taps import (
    COORD_MODES,
    NEAREST_MODES,
    ResizeParams,
    apply_axis,
    axis_taps,
    is_identity,
)

MODES = ("nearest", "linear", "cubic")


@helper
def offset_beside(x, out, axis):
    """The flat offset in ``x`` of this output position's coordinates other than ``axis``."""
    off = 0
    for d in static_range(out.ndim):
        if d != axis:
            off = off + out.index[d] * x.strides[d]
    return off


@kernel
def resize_axis(x: Tensor, idx: Tensor, w: Tensor, outside: Tensor, out: Output, axis: int,
                extrapolation: float, isint: bool, lo: float, hi: float):
    """One separable pass along ``axis``: a weighted sum of taps (or the extrapolation value)."""
    j = out.index[axis]
    if outside.flat[j] != 0:
        return cast(extrapolation, out.dtype)
    off = offset_beside(x, out, axis)
    acc = 0.0
    for t in range(idx.shape[1]):
        acc += w[j, t] * cast(x.flat[off + idx[j, t] * x.strides[axis]], f32)
    if isint:
        return cast(min(max(round(acc), lo), hi), out.dtype)
    return cast(acc, out.dtype)


@kernel
def resize_gather_axis(x: Tensor, idx: Tensor, outside: Tensor, out: Output, axis: int,
                       extrapolation: float):
    """One nearest pass along ``axis``: a copy of the chosen input (no float round trip, so
    int64 stays exact and a NaN neighbour does not spread)."""
    j = out.index[axis]
    if outside.flat[j] != 0:
        return cast(extrapolation, out.dtype)
    off = offset_beside(x, out, axis)
    return x.flat[off + idx.flat[j] * x.strides[axis]]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _ResizeBase(OpDef):
    """What Resize and Upsample share: output shape, passes, reference and lowering."""

    def params(self, node: Node) -> ResizeParams:
        raise NotImplementedError

    def plan(self, node: Node, shape: Sequence[int], values) -> tuple[list[int], list[float],
                                                                        list | None] | None:
        """(output shape, per-axis scales, roi per axis or None); None if inputs unknown."""
        raise NotImplementedError

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None and x.shape is not None
        self.params(node)
        if not x.is_static:
            return [TensorInfo(x.dtype, tuple([None] * rank))]
        planned = self.plan(node, static(x), values)
        if planned is None:
            return [TensorInfo(x.dtype, tuple([None] * rank))]
        return [TensorInfo(x.dtype, tuple(planned[0]))]

    def passes(self, node: Node, shape: Sequence[int], values):
        planned = self.plan(node, shape, values)
        if planned is None:
            return None
        out_shape, scales, roi = planned
        p = self.params(node)
        passes = []
        for axis, (n_in, n_out) in enumerate(zip(shape, out_shape)):
            if n_out == 0 or n_in == 0:
                continue
            idx, w, outside = axis_taps(p, n_in, n_out, scales[axis],
                                        None if roi is None else roi[axis])
            if p.mode == "nearest":  # one tap: a copy, not a sum with zero weights
                pick = np.argmax(w, axis=1)
                rows = np.arange(len(pick))
                idx, w = idx[rows, pick][:, None], np.ones((len(pick), 1))
            if not is_identity(idx, w, outside, n_in):
                passes.append((axis, idx, w, outside))
        return out_shape, passes

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        planned = self.passes(node, x.shape, inputs)
        assert planned is not None
        out_shape, passes = planned
        if 0 in out_shape or 0 in x.shape:
            return [np.zeros(out_shape, x.dtype)]
        y = x.astype(np.float64)
        for axis, idx, w, outside in passes:
            y = apply_axis(y, axis, idx, w, outside, self.params(node).extrapolation)
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            y = np.clip(np.round(y), info.min, info.max)
        return [y.astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        x = inputs[0]
        kernel_dtype(node, x)
        shape = static(x)
        planned = self.passes(node, shape, values)
        require_values(node, "the scales/sizes/roi inputs", planned)
        assert planned is not None
        out_shape, passes = planned
        low = Lowering()
        if 0 in out_shape:
            return low
        if not passes:
            low.launch(copy_index, [In(0)], Out(0))
            return low
        p = self.params(node)
        isint = not x.dtype.is_float
        info = np.iinfo(x.dtype.numpy) if isint and x.dtype is not DType.bool else None
        src: In | Tmp = In(0)
        cur = list(shape)
        for k, (axis, idx, w, outside) in enumerate(passes):
            cur[axis] = idx.shape[0]
            last = k == len(passes) - 1
            if p.mode == "nearest":
                dst = Out(0) if last else low.temp(x.dtype, cur)
                low.launch(resize_gather_axis,
                           [src, Data(idx[:, 0].copy()), Data(outside.astype(np.int32))], dst,
                           axis=axis, extrapolation=float(p.extrapolation))
                src = dst  # type: ignore[assignment]
                continue
            dst = Out(0) if last else low.temp(DType.float32, cur)
            low.launch(resize_axis,
                       [src, Data(idx), Data(w.astype(np.float32)),
                        Data(outside.astype(np.int32))], dst,
                       axis=axis, extrapolation=float(p.extrapolation), isint=bool(last and isint),
                       lo=float(info.min) if info else 0.0, hi=float(info.max) if info else 0.0)
            src = dst  # type: ignore[assignment]
        return low


class Resize(_ResizeBase):
    op_type = "Resize"
    since_version = 10
    value_inputs = (1, 2, 3)

    def params(self, node: Node) -> ResizeParams:
        mode = _text(self.attr(node, "mode", "nearest"))
        if mode not in MODES or (node.opset < 11 and mode == "cubic"):
            raise self.fail(node, f"unsupported mode {mode!r}")
        if node.opset < 11:  # Resize-10 samples like Upsample
            return ResizeParams(mode, "asymmetric", "floor")
        coord = _text(self.attr(node, "coordinate_transformation_mode", "half_pixel"))
        nearest = _text(self.attr(node, "nearest_mode", "round_prefer_floor"))
        if coord not in COORD_MODES or (coord == "half_pixel_symmetric" and node.opset < 19) \
                or (coord == "tf_half_pixel_for_nn" and node.opset >= 13):
            raise self.fail(node, f"unsupported coordinate_transformation_mode {coord!r}")
        if nearest not in NEAREST_MODES:
            raise self.fail(node, f"unsupported nearest_mode {nearest!r}")
        antialias = bool(int(self.attr(node, "antialias", 0)))
        if antialias and mode == "nearest":
            raise self.fail(node, "antialias applies to linear and cubic modes only")
        return ResizeParams(mode, coord, nearest, float(self.attr(node, "cubic_coeff_a", -0.75)),
                            bool(int(self.attr(node, "exclude_outside", 0))), antialias,
                            float(self.attr(node, "extrapolation_value", 0.0)))

    def plan(self, node: Node, shape: Sequence[int], values):
        rank = len(shape)
        if node.opset < 11:
            return _from_scales(self, node, shape, values[1] if len(values) > 1 else None)
        axes = norm_axes(node, list(self.attr(node, "axes", range(rank))), rank)

        def known(i: int) -> np.ndarray | None:
            if not has_input(node, i):
                return np.zeros(0)
            return None if i >= len(values) or values[i] is None else np.asarray(values[i])

        roi_v, scales_v, sizes_v = known(1), known(2), known(3)
        if roi_v is None or scales_v is None or sizes_v is None:
            return None
        if scales_v.size and sizes_v.size:
            raise self.fail(node, "only one of scales and sizes may be given")
        roi = None
        if roi_v.size:
            if roi_v.size != 2 * len(axes):
                raise self.fail(node, f"roi has {roi_v.size} values, expected {2 * len(axes)}")
            roi = [(0.0, 1.0)] * rank
            for i, a in enumerate(axes):
                roi[a] = (float(roi_v[i]), float(roi_v[i + len(axes)]))
        if scales_v.size:
            if scales_v.size != len(axes):
                raise self.fail(node, f"scales has {scales_v.size} values for {len(axes)} axes")
            scales = [1.0] * rank
            for i, a in enumerate(axes):
                scales[a] = float(scales_v[i])
            if not all(0 < s < math.inf for s in scales):
                raise self.fail(node, f"scales must be positive and finite, got "
                                      f"{scales_v.tolist()}")
            return [int(s * n) for s, n in zip(scales, shape)], scales, roi
        if not sizes_v.size:
            raise self.fail(node, "one of scales and sizes is required")
        if sizes_v.size != len(axes):
            raise self.fail(node, f"sizes has {sizes_v.size} values for {len(axes)} axes")
        if (sizes_v < 0).any():
            raise self.fail(node, f"sizes must not be negative, got {sizes_v.tolist()}")
        out = list(shape)
        for i, a in enumerate(axes):
            out[a] = int(sizes_v[i])
        scales = [o / n if n else 1.0 for o, n in zip(out, shape)]
        policy = _text(self.attr(node, "keep_aspect_ratio_policy", "stretch"))
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise self.fail(node, f"unsupported keep_aspect_ratio_policy {policy!r}")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scales[a] for a in axes)
            scales = [s if d in axes else 1.0 for d in range(rank)]
            out = [int(s * shape[d] + 0.5) if d in axes else shape[d] for d in range(rank)]
        return out, scales, roi

    def cases(self) -> list[OpCase]:
        x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
        empty = np.zeros(0, np.float32)
        up = np.array([1, 1, 1.5, 2.0], np.float32)
        down = np.array([1, 1, 0.6, 0.5], np.float32)
        cases = [OpCase(f"nearest_{m}", [x, empty, up], {"mode": "nearest", "nearest_mode": m},
                        opset=19) for m in NEAREST_MODES]
        for c in COORD_MODES:
            if c == "tf_half_pixel_for_nn":  # nearest only, opsets 11-12
                cases.append(OpCase(f"nearest_{c}", [x, empty, down], {
                    "mode": "nearest", "coordinate_transformation_mode": c}, opset=11))
                continue
            roi = np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7], np.float32)
            cases.append(OpCase(f"linear_{c}", [x, roi if c == "tf_crop_and_resize" else empty,
                                                up], {"mode": "linear",
                                                      "coordinate_transformation_mode": c,
                                                      "extrapolation_value": -1.0},
                                opset=19, rtol=1e-4, atol=1e-4))
        return [
            *cases,
            OpCase(
                "cubic_down",
                [x, empty, down],
                {"mode": "cubic"},
                opset=19,
                rtol=0.0001,
                atol=0.0001,
            ),
            OpCase(
                "cubic_a_exclude",
                [x, empty, up],
                {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
                opset=19,
                rtol=0.0001,
                atol=0.0001,
            ),
            OpCase(
                "antialias_linear",
                [x, empty, down],
                {"mode": "linear", "antialias": 1},
                opset=19,
                rtol=0.0001,
                atol=0.0001,
            ),
            OpCase(
                "sizes_not_larger",
                [x, empty, empty, np.array([3, 5], np.int64)],
                {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"},
                opset=19,
                rtol=0.0001,
                atol=0.0001,
            ),
            OpCase(
                "uint8_linear", [(x * 16).astype(np.uint8), empty, up], {"mode": "linear"}, opset=19
            ),
            OpCase("opset10_nearest", [x, up], {"mode": "nearest"}, opset=10),
            # nearest copies: integers beyond float32's 2**24 stay exact
            OpCase("nearest_int32_exact", [(x * 1_000_003 + 16_777_217).astype(np.int32), empty,
                                           up], {"mode": "nearest"}, opset=19),
            OpCase("nearest_int64_exact", [x.astype(np.int64) * 2**40 + 1, empty, up],
                   {"mode": "nearest"}, opset=19),
            OpCase("identity", [x, empty, np.ones(4, np.float32)], {"mode": "linear"}, opset=13),
        ]


def _from_scales(op: OpDef, node: Node, shape: Sequence[int], scales_v) -> tuple | None:
    if scales_v is None:
        return None
    scales = [float(s) for s in np.asarray(scales_v).reshape(-1)]
    if len(scales) != len(shape) or not all(0 < s < math.inf for s in scales):
        raise op.fail(node, f"scales {scales} must be {len(shape)} positive finite values")
    return [int(s * n) for s, n in zip(scales, shape)], scales, None


class Upsample(_ResizeBase):
    """Deprecated since opset 10: scales as an attribute (7) or input (9)."""

    op_type = "Upsample"
    since_version = 7
    until_version = 10
    value_inputs = (1,)

    def params(self, node: Node) -> ResizeParams:
        mode = _text(self.attr(node, "mode", "nearest"))
        if mode not in ("nearest", "linear", "bilinear"):
            raise self.fail(node, f"unsupported mode {mode!r}")
        return ResizeParams("linear" if mode == "bilinear" else mode, "asymmetric", "floor")

    def plan(self, node: Node, shape: Sequence[int], values):
        if node.opset < 9:
            return _from_scales(self, node, shape, np.asarray(self.attr(node, "scales",
                                                                        required=True)))
        return _from_scales(self, node, shape, values[1] if len(values) > 1 else None)

    def cases(self) -> list[OpCase]:
        x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
        s = np.array([1, 1, 2, 3], np.float32)
        return [OpCase("nearest9", [x, s], {"mode": "nearest"}, opset=9),
                OpCase("linear9", [x, s], {"mode": "linear"}, opset=9),
                OpCase("nearest7", [x], {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 2.0]},
                       opset=7)]


OPS: list[type[OpDef]] = [Resize, Upsample]
