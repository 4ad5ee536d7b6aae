"""Data-movement kernels for the cpu backend: Transpose, Concat, Pad and nearest-neighbour
Resize as single numpy copies into the output buffer."""

from __future__ import annotations

from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import kernel_attributes
from spawnml.registry import find_op

from .fast_kernels import Arrays, Compute, CpuKernel, _known


def _text(value: object, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


class Transpose(CpuKernel):
    op_type = "Transpose"
    since_version = 1
    attributes = kernel_attributes("perm")
    dtypes = frozenset(DType) - {DType.bfloat16}

    def build(self, node, inputs, outputs, values) -> Compute:
        rank = len(inputs[0].shape)
        perm = tuple(node.attrs.get("perm") or range(rank - 1, -1, -1))
        return lambda a, out: np.copyto(out[0], a[0].transpose(perm))


class Concat(CpuKernel):
    op_type = "Concat"
    since_version = 4  # 1-3: ``axis`` optional (default 1)
    attributes = kernel_attributes("axis")
    dtypes = Transpose.dtypes

    def accepts(self, node, inputs, outputs) -> bool:
        return all(i is not None for i in inputs)

    def build(self, node, inputs, outputs, values) -> Compute:
        axis = int(node.attrs["axis"]) % len(outputs[0].shape)
        return lambda a, out: np.concatenate(a, axis=axis, out=out[0])


class Pad(CpuKernel):
    """Opset 11+ Pad (pads/constant_value/axes inputs), modes constant, reflect, edge: the
    op's own numpy reference (np.pad, with its rules for negative pads) written into the
    output buffer, without the portable kernel's per-element index arithmetic."""

    op_type = "Pad"
    since_version = 11  # 1-10: pads/value attributes; 18 adds the axes input (handled)
    attributes = kernel_attributes(mode=("constant", "reflect", "edge"))  # 19's "wrap": portable
    dtype_inputs = (0, 2)

    def build(self, node, inputs, outputs, values) -> Compute:
        op = find_op(node.domain, node.op_type, node.opset)

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            out[0][...] = op.reference(node, a)[0]

        return compute


_TRANSFORMS = {
    "half_pixel": lambda o, s, i, n: (o + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda o, s, i, n: (o + 0.5) / s - 0.5 if n > 1 else 0.0 * o,
    "asymmetric": lambda o, s, i, n: o / s,
    "tf_half_pixel_for_nn": lambda o, s, i, n: (o + 0.5) / s,
    # the resized length is in_size * scale, unfloored (onnx.reference, onnxruntime)
    "align_corners": lambda o, s, i, n: o * (i - 1) / (i * s - 1) if n > 1 else 0.0 * o,
}
_ROUNDING = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def nearest_indices(
    size_in: int, size_out: int, scale: float, transform: str, rounding: str
) -> np.ndarray:
    """Source index of every output position along one axis (ONNX Resize, mode nearest)."""
    pos = _TRANSFORMS[transform](np.arange(size_out, dtype=np.float64), scale, size_in, size_out)
    return np.clip(_ROUNDING[rounding](pos), 0, size_in - 1).astype(np.intp)


def linear_taps(
    size_in: int, size_out: int, scale: float, transform: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower/upper source index and upper weight of every output position along one axis
    (ONNX Resize, mode linear, no antialias; positions clamped to the input)."""
    pos = _TRANSFORMS[transform](np.arange(size_out, dtype=np.float64), scale, size_in, size_out)
    pos = np.clip(pos, 0, size_in - 1)
    low = np.floor(pos).astype(np.intp)
    high = np.minimum(low + 1, size_in - 1)
    return low, high, (pos - low).astype(np.float32)


class Resize(CpuKernel):
    """Resize (opset 11+) modes nearest (one fancy-indexing gather) and linear without
    antialias (separable: one lerp per resized axis)."""

    op_type = "Resize"
    since_version = 11  # 10: scales is input 1 and no roi
    attributes = kernel_attributes(
        "cubic_coeff_a",  # read by mode "cubic" only
        mode=("nearest", "linear"),
        coordinate_transformation_mode=_TRANSFORMS,
        nearest_mode=_ROUNDING,
        exclude_outside=(0,),
        antialias=(0,),
        keep_aspect_ratio_policy=("stretch",),
    )  # axes and extrapolation_value (tf_crop_and_resize): portable
    dtype_inputs = (0,)

    def accepts(self, node, inputs, outputs) -> bool:
        a = node.attrs
        mode = _text(a.get("mode"), "nearest")
        transform = _text(a.get("coordinate_transformation_mode"), "half_pixel")
        return (
            bool(node.opset)
            and node.opset >= 11
            and transform in _TRANSFORMS
            and (
                (
                    mode == "nearest"
                    and _text(a.get("nearest_mode"), "round_prefer_floor") in _ROUNDING
                )
                or (
                    mode == "linear"
                    and not a.get("antialias")
                    and transform != "tf_half_pixel_for_nn"
                )
            )
            and not a.get("axes")
            and _text(a.get("keep_aspect_ratio_policy"), "stretch") == "stretch"
        )

    def build(self, node, inputs, outputs, values) -> Compute:
        shape_in, shape_out = inputs[0].shape, outputs[0].shape
        mode = _text(node.attrs.get("mode"), "nearest")
        transform = _text(node.attrs.get("coordinate_transformation_mode"), "half_pixel")
        rounding = _text(node.attrs.get("nearest_mode"), "round_prefer_floor")
        scales_known = _known(values, 2)
        uses_sizes = len(inputs) > 3 and inputs[3] is not None
        uses_scales = not uses_sizes and len(inputs) > 2 and inputs[2] is not None
        if uses_scales and inputs[2].size == 0:
            return lambda a, out: np.copyto(out[0], a[0])

        def plan(scales: np.ndarray | None) -> Any:
            axes = []
            for axis, (i, o) in enumerate(zip(shape_in, shape_out)):
                scale = float(scales[axis]) if scales is not None else o / i
                if mode == "nearest":
                    axes.append(nearest_indices(i, o, scale, transform, rounding))
                elif i != o or scale != 1:
                    axes.append((axis, *linear_taps(i, o, scale, transform)))
            return np.ix_(*axes) if mode == "nearest" else axes

        def lerp(x: np.ndarray, taps: list) -> np.ndarray:
            for axis, low, high, w in taps:
                shape = [1] * x.ndim
                shape[axis] = -1
                lo = np.take(x, low, axis=axis)
                x = lo + (np.take(x, high, axis=axis) - lo) * w.reshape(shape)
            return x

        fixed = (
            None
            if uses_scales and scales_known is None
            else plan(scales_known if uses_scales else None)
        )

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            found = fixed if fixed is not None else plan(a[2])
            out[0][...] = a[0][found] if mode == "nearest" else lerp(a[0], found)

        return compute


KERNELS: list[type[CpuKernel]] = [Transpose, Concat, Pad, Resize]
