"""What convolution and pooling share: attribute checks, window geometry, numpy windows.

Portable kernels for 1-D/2-D/3-D are written once for three spatial dims: the lowering
left-pads every spatial tuple (shape, strides, pads, ...) to length 3 with neutral values
(size 1, stride 1, pad 0), so a 1-D or 2-D op runs the same kernel with size-1 loops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.kernel import helper
from spawnml.op import Node, OpDef, TensorInfo

from .common import static_shape

SPATIAL_MAX = 3
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOATS = (DType.float32, DType.float16, DType.float64)


def ints_attr(
    op: OpDef, node: Node, name: str, n: int, default: int, minimum: int | None = None
) -> tuple[int, ...]:
    """An INTS attribute of length ``n`` (or its default), checked against ``minimum``."""
    value = op.attr(node, name)
    if value is None:
        return (default,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise op.fail(node, f"attribute {name!r} has {len(value)} values, expected {n}")
    if minimum is not None and any(v < minimum for v in value):
        raise op.fail(node, f"attribute {name!r} = {list(value)} has values below {minimum}")
    return value


def auto_pad_attr(op: OpDef, node: Node) -> str:
    mode = op.attr(node, "auto_pad", "NOTSET")
    if mode not in AUTO_PADS:
        raise op.fail(node, f"attribute 'auto_pad' = {mode!r} is not one of {list(AUTO_PADS)}")
    return mode


def spatial_input(op: OpDef, node: Node, x: TensorInfo | None, dtypes=FLOATS) -> tuple[int, ...]:
    """The static shape of an (N, C, spatial...) input with 1..3 spatial dims."""
    if x is None:
        raise op.fail(node, "input 0 (X) is required")
    if x.dtype not in dtypes:
        raise op.fail(node, f"dtype {x.dtype} is not supported")
    if x.shape is None or not x.is_static:
        raise op.fail(node, f"input X needs a static shape, got {x.shape}")
    shape = static_shape(x)
    if not 3 <= len(shape) <= 2 + SPATIAL_MAX:
        raise op.fail(node, f"input X must have rank 3..5 (N, C, 1-3 spatial dims), got {shape}")
    return shape


@dataclass(frozen=True)
class Window:
    """Sliding-window geometry over the spatial dims (all tuples of length ``ndim``)."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def extent(self) -> tuple[int, ...]:
        """Span of one dilated window."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def window(
    op: OpDef,
    node: Node,
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    ceil_mode: bool = False,
    dilations_attr: bool = True,
) -> Window:
    """Output size and pads of Conv/pooling from strides, dilations, pads, auto_pad, ceil_mode."""
    n = len(in_spatial)
    strides = ints_attr(op, node, "strides", n, 1, minimum=1)
    dilations = ints_attr(op, node, "dilations", n, 1, minimum=1) if dilations_attr else (1,) * n
    mode = auto_pad_attr(op, node)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if mode == "NOTSET":
        pads = ints_attr(op, node, "pads", 2 * n, 0, minimum=0)
        begin, end = pads[:n], pads[n:]
        out = []
        for i in range(n):
            span = in_spatial[i] + begin[i] + end[i] - extent[i]
            if span < 0:
                raise op.fail(node, f"kernel extent {extent[i]} exceeds the padded input "
                                    f"({in_spatial[i]} + pads) on spatial axis {i}")
            size = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            # ceil_mode: the last window must start inside the input or its begin padding.
            if ceil_mode and (size - 1) * strides[i] >= in_spatial[i] + begin[i]:
                size -= 1
            out.append(size)
        return _made(in_spatial, kernel, strides, dilations, begin, end, out)
    if "pads" in node.attrs and any(int(p) for p in node.attrs["pads"]):
        raise op.fail(node, f"attributes 'pads' and 'auto_pad' = {mode!r} are exclusive")
    if mode == "VALID":
        out = [(in_spatial[i] - extent[i]) // strides[i] + 1 for i in range(n)]
        if any(o < 1 for o in out):
            raise op.fail(node, f"kernel extent {extent} exceeds the input {list(in_spatial)}")
        return _made(in_spatial, kernel, strides, dilations, (0,) * n, (0,) * n, out)
    out = [math.ceil(in_spatial[i] / strides[i]) for i in range(n)]
    total = [max(0, (out[i] - 1) * strides[i] + extent[i] - in_spatial[i]) for i in range(n)]
    small = tuple(t // 2 for t in total)
    large = tuple(t - t // 2 for t in total)
    begin, end = (small, large) if mode == "SAME_UPPER" else (large, small)
    return _made(in_spatial, kernel, strides, dilations, begin, end, out)


def _made(in_spatial, kernel, strides, dilations, begin, end, out) -> Window:
    """The Window, with a stride beyond the padded input cut to the padded input's length:
    one output spans that axis either way, and no kernel or reference index (stride *
    position) overflows with an arbitrary stride (an INT64_MAX stride is valid ONNX)."""
    strides = tuple(min(s, max(1, i + b + e))
                    for s, i, b, e in zip(strides, in_spatial, begin, end))
    return Window(tuple(kernel), strides, tuple(dilations), tuple(begin), tuple(end),
                  tuple(out))


def pad3(values: Sequence[int], fill: int) -> tuple[int, ...]:
    """Left-pad a per-spatial-dim tuple to three dims (the kernels' fixed spatial rank)."""
    return (fill,) * (SPATIAL_MAX - len(values)) + tuple(int(v) for v in values)


@helper
def spatial_index(out, d, nsp):
    """Output position along padded spatial dim ``d`` (0 for a padding dim)."""
    return out.index[2 + d - (3 - nsp)] if d >= 3 - nsp else 0


# -------------------------------------------------------------------------------- numpy


def array_infos(arrays: Sequence[np.ndarray | None]) -> list[TensorInfo | None]:
    """TensorInfos of host arrays (references reuse ``infer``'s checks)."""
    return [None if a is None else TensorInfo(as_dtype(a.dtype), tuple(a.shape)) for a in arrays]


def sliding_windows(
    x: np.ndarray, win: Window, fill: float
) -> np.ndarray:
    """(N, C, *out, *kernel) view of ``x`` padded with ``fill`` (numpy references)."""
    n = len(win.kernel)
    need = [
        (win.out[i] - 1) * win.strides[i] + win.extent[i] - x.shape[2 + i] - win.pads_begin[i]
        for i in range(n)
    ]
    pad = [(0, 0), (0, 0)] + [(win.pads_begin[i], max(need[i], 0)) for i in range(n)]
    xp = np.pad(x, pad, constant_values=fill)
    strides = xp.strides
    shape = (*x.shape[:2], *win.out, *win.kernel)
    view_strides = (
        *strides[:2],
        *(strides[2 + i] * win.strides[i] for i in range(n)),
        *(strides[2 + i] * win.dilations[i] for i in range(n)),
    )
    return np.lib.stride_tricks.as_strided(xp, shape, view_strides, writeable=False)


def pad_mask(in_spatial: Sequence[int], win: Window, include_pad: bool) -> np.ndarray:
    """(*out, *kernel) bool: which window taps count (inside the input, or inside the
    explicit padding when ``include_pad``; never the extra ceil_mode region)."""
    n = len(in_spatial)
    masks = []
    for i in range(n):
        o = np.arange(win.out[i])[:, None]
        k = np.arange(win.kernel[i])[None, :]
        pos = o * win.strides[i] - win.pads_begin[i] + k * win.dilations[i]
        lo, hi = (-win.pads_begin[i], in_spatial[i] + win.pads_end[i]) if include_pad else (
            0, in_spatial[i])
        masks.append((pos >= lo) & (pos < hi))
    full = np.ones((*win.out, *win.kernel), dtype=bool)
    for i, m in enumerate(masks):
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = m.shape
        full = full & m.reshape(shape)
    return full
