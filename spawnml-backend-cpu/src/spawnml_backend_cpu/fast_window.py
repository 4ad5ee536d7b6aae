"""Window geometry (ONNX output-size rules), padded inputs and per-thread scratch arrays
shared by the numpy convolution and pooling kernels."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Finish = Callable[[np.ndarray, np.ndarray], object]
"""``finish(out, result)`` writes the node's final values of ``result`` (an array shaped like
``out``, possibly ``out`` itself) into ``out``: np.copyto, or a fused activation."""


@dataclass(frozen=True)
class Window:
    """Sliding-window geometry for ``spatial`` input dims: begin/end pads include the extra
    end padding ceil_mode needs; ``out`` is the output spatial shape."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]  # declared end pads
    extra: tuple[int, ...]  # ceil_mode padding past the declared pads
    out: tuple[int, ...]

    @property
    def taps(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.kernel)))

    def tap_slices(self, tap: Sequence[int]) -> tuple[slice, ...]:
        """Slices of the padded input holding the elements tap ``tap`` reads for every output."""
        return tuple(
            slice(t * d, t * d + s * (o - 1) + 1, s)
            for t, d, s, o in zip(tap, self.dilations, self.strides, self.out)
        )


def window(
    spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
) -> Window:
    """ONNX Conv/Pool output-size rules (auto_pad SAME_UPPER/SAME_LOWER/VALID, ceil_mode)."""
    rank = len(spatial)
    strides = tuple(strides or [1] * rank)
    dilations = tuple(dilations or [1] * rank)
    kernel = tuple(kernel)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / s) for i, s in zip(spatial, strides)]
        total = [max(0, (o - 1) * s + w - i) for o, s, w, i in zip(out, strides, span, spatial)]
        small = [t // 2 for t in total]
        big = [t - h for t, h in zip(total, small)]
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad == "VALID":
        begin = end = [0] * rank
    else:
        p = list(pads or [0] * (2 * rank))
        begin, end = p[:rank], p[rank:]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = out
    else:
        rnd = math.ceil if ceil_mode else math.floor
        out_shape = []
        for i, b, e, w, s in zip(spatial, begin, end, span, strides):
            o = int(rnd((i + b + e - w) / s)) + 1
            if ceil_mode and (o - 1) * s >= i + b:  # a window must start inside input/begin pad
                o -= 1
            out_shape.append(o)
    extra = [
        max(0, (o - 1) * s + w - (i + b + e))
        for o, s, w, i, b, e in zip(out_shape, strides, span, spatial, begin, end)
    ]
    # a stride beyond the padded input (one output along that axis) is cut to its length:
    # the kernels split the input into stride x stride phases
    strides = tuple(min(s, max(1, i + b + e))
                    for s, i, b, e in zip(strides, spatial, begin, end))
    return Window(
        kernel, strides, dilations, tuple(begin), tuple(end), tuple(extra), tuple(out_shape)
    )


_local = threading.local()


def scratch(slot: str, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A reusable per-thread work array (contents undefined), grown on demand: padded
    inputs and column matrices are rebuilt every call, so allocating them is wasted time."""
    pool: dict[str, np.ndarray] = _local.__dict__.setdefault("pool", {})
    size = math.prod(shape)
    flat = pool.get(slot)
    if flat is None or flat.dtype != dtype or flat.size < size:
        flat = pool[slot] = np.empty(max(size, 1), dtype)
    return flat[:size].reshape(tuple(shape))


def padded(x: np.ndarray, win: Window, fill: float) -> np.ndarray:
    """``x`` (N, C, *spatial) inside a border of ``fill`` (pads plus ceil_mode extra)."""
    if not any(win.begin) and not any(win.end) and not any(win.extra):
        return x
    lo, hi = win.begin, tuple(e + x_ for e, x_ in zip(win.end, win.extra))
    shape = x.shape[:2] + tuple(i + b + e for i, b, e in zip(x.shape[2:], lo, hi))
    out = scratch("padded", shape, x.dtype)
    lead = (slice(None), slice(None))
    for axis, (b, e) in enumerate(zip(lo, hi)):  # only the border is filled
        before = [slice(None)] * len(lo)
        if b:
            before[axis] = slice(0, b)
            out[(*lead, *before)] = fill
        if e:
            before[axis] = slice(shape[2 + axis] - e, None)
            out[(*lead, *before)] = fill
    out[(*lead, *(slice(b, b + i) for b, i in zip(lo, x.shape[2:])))] = x
    return out
