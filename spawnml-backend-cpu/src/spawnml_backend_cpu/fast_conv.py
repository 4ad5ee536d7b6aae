"""Numpy/BLAS convolution (N-D, NCHW), planned once per node by :class:`ConvPlan`.

Paths, chosen from the geometry:

- ``pointwise`` (1x1, stride 1, no pads, one group): one matmul over the input as it is;
- ``depthwise`` (2-D, one channel per group): on the flat tap grid of fast_taps, either one
  (1 x taps) @ (taps x length) BLAS product per channel (short grids) or a multiply-add per
  tap (long grids, where the column matrix would fall out of cache);
- ``columns`` (other 2-D convs): a column matrix filled by one contiguous copy per tap, then
  one batched matmul per block of output rows (the matrix stays cache-sized);
- ``strided`` (1-D, 3-D): im2col or tap loops over strided views of the padded input.

Where a path builds the product's right operand anyway, a row of ones is appended to it and
the bias becomes one more weight column, so no separate bias pass runs; the fused activation
(``finish``) is applied in the pass that moves the result into ``out``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .fast_taps import FlatTaps, flat_taps
from .fast_window import Finish, Window, padded, scratch

_COLS_BUDGET = 1 << 21  # float32 elements per im2col block (8 MiB)
_DW_MATMUL_LENGTH = 1024  # longest grid row a depthwise conv multiplies through BLAS
_DW_COLS_BUDGET = 1 << 18  # float32 elements per depthwise column block (1 MiB)


def conv(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, win: Window, group: int, out: np.ndarray
) -> None:
    """ONNX Conv (float32) written into ``out`` (N, M, *win.out)."""
    ConvPlan(w, b, win, group)(x, out)


def _with_bias(w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """(..., K) weights with the bias appended as column K (for a ones row in the columns)."""
    if b is None:
        return np.ascontiguousarray(w)
    return np.concatenate([w, b.reshape(*w.shape[:-1], 1).astype(w.dtype)], axis=-1)


class ConvPlan:
    """One Conv's path and its weights in that path's layout, prepared once."""

    def __init__(
        self, w: np.ndarray, b: np.ndarray | None, win: Window, group: int,
        finish: Finish = np.copyto,
    ) -> None:  # fmt: skip
        m, cin = w.shape[0], w.shape[1] * group
        rank = len(win.kernel)
        self.win, self.group, self.finish = win, group, finish
        self.bias = None if b is None else b.reshape((m,) + (1,) * rank)
        unit = all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
        if unit and group == 1 and not any(win.begin + win.end):
            self.path = "pointwise"
            # Folding the bias costs a copy of the input: worth it when the output is larger.
            self.folded = b is not None and m > cin
            self.w = _with_bias(w.reshape(m, cin), b) if self.folded else w.reshape(m, cin)
        elif rank == 2 and group == cin == m:
            self.path = "depthwise"
            self.w = w.reshape(m, -1)
            self.w_bias = _with_bias(self.w, b)
        elif rank == 2:
            self.path = "columns"
            self.w = _with_bias(w.reshape(group, m // group, -1), b)
        else:
            self.path = "strided"
            self.w = w

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        if self.path == "pointwise":
            self._pointwise(x, out)
        elif self.path == "depthwise":
            self._depthwise(flat_taps(x, self.win, 0.0), out)
        elif self.path == "columns":
            self._columns(flat_taps(x, self.win, 0.0), out)
        else:
            self._strided(x, out)

    def _finish_in_place(self, out: np.ndarray, add_bias: bool) -> None:
        if add_bias and self.bias is not None:
            out += self.bias
        if self.finish is not np.copyto:
            self.finish(out, out)

    def _pointwise(self, x: np.ndarray, out: np.ndarray) -> None:
        n, c = x.shape[:2]
        m = out.shape[1]
        flat = out.reshape(n, m, -1)
        if not self.folded:
            np.matmul(self.w, x.reshape(n, c, -1), out=flat)
            self._finish_in_place(out, add_bias=True)
            return
        length = flat.shape[2]
        ones = scratch("pointwise", (c + 1, length), x.dtype)
        ones[c] = 1.0
        for i in range(n):
            ones[:c] = x[i].reshape(c, length)
            np.matmul(self.w, ones, out=flat[i])
        self._finish_in_place(out, add_bias=False)

    def _depthwise(self, taps: FlatTaps, out: np.ndarray) -> None:
        if taps.length <= _DW_MATMUL_LENGTH:
            self.finish(out, taps.crop(_depthwise_matmul(taps, self.w_bias)))
            return
        acc = _depthwise_taps(taps, self.w)
        if self.bias is None:
            self.finish(out, taps.crop(acc))
        else:
            np.add(taps.crop(acc), self.bias, out=out)
            self._finish_in_place(out, add_bias=False)

    def _columns(self, taps: FlatTaps, out: np.ndarray) -> None:
        """One matmul per block of output rows: the column matrix (Cg * taps [+ 1], span) of
        each group is filled by one contiguous-row copy per tap (and a ones row for the bias);
        the product lands on the grid and ``finish`` crops it into ``out``."""
        n, c = taps.phases.shape[1:3]
        group, mg, k = self.w.shape
        cg = c // group
        ntaps = len(self.win.taps)
        (ho, wo), width = self.win.out, taps.width
        rows = max(1, min(ho, _COLS_BUDGET // max(1, c * ntaps * width)))
        blocks = list(taps.tap_blocks())
        dtype = taps.phases.dtype
        for i in range(n):
            for r0 in range(0, ho, rows):
                r1 = min(ho, r0 + rows)
                begin, span = r0 * width, (r1 - r0) * width
                cols = scratch("cols", (group, k, span), dtype)
                kernel = cols[:, : cg * ntaps].reshape(group, cg, *self.win.kernel, span)
                for ky, kx, view in blocks:
                    src = view[i, ..., begin : begin + span]
                    kernel[:, :, ky, kx] = src.reshape(group, cg, *src.shape[1:])
                if k > cg * ntaps:
                    cols[:, -1] = 1.0
                grid = scratch("grid", (group, mg, span), dtype)
                np.matmul(self.w, cols, out=grid)
                result = grid.reshape(group * mg, r1 - r0, width)[..., :wo]
                self.finish(out[i, :, r0:r1], result)

    def _strided(self, x: np.ndarray, out: np.ndarray) -> None:
        w, group = self.w, self.group
        m = w.shape[0]
        xp = padded(x, self.win, 0.0)
        if w.shape[1] == 1 and m == x.shape[1] == group:
            _depthwise_strided(xp, w, self.win, out)
        else:
            _im2col_strided(xp, w.reshape(group, m // group, -1), self.win, group, out)
        self._finish_in_place(out, add_bias=True)


def _depthwise_taps(taps: FlatTaps, wk: np.ndarray) -> np.ndarray:
    acc, tmp = taps.grid("acc"), taps.grid("taps")
    for i, src in enumerate(taps.taps()):
        weight = wk[:, i : i + 1]  # (M, 1) against (N, M, length)
        if i == 0:
            np.multiply(src, weight, out=acc)
        else:
            np.multiply(src, weight, out=tmp)
            acc += tmp
    return acc


def _depthwise_matmul(taps: FlatTaps, wk: np.ndarray) -> np.ndarray:
    """Per channel, weights (1, taps [+ 1]) @ columns (taps [+ ones], length) through BLAS, in
    cache-sized channel blocks."""
    acc = taps.grid("acc")
    n, c, length = acc.shape
    k = wk.shape[1]
    ntaps = len(taps.win.taps)
    step = max(1, _DW_COLS_BUDGET // (k * length))
    blocks = list(taps.tap_blocks())
    for i in range(n):
        for c0 in range(0, c, step):
            c1 = min(c, c0 + step)
            cols = scratch("cols", (c1 - c0, k, length), acc.dtype)
            kernel = cols[:, :ntaps].reshape(c1 - c0, *taps.win.kernel, length)
            for ky, kx, view in blocks:
                kernel[:, ky, kx] = view[i, c0:c1]
            if k > ntaps:
                cols[:, ntaps] = 1.0
            np.matmul(wk[c0:c1, None, :], cols, out=acc[i, c0:c1, None, :])
    return acc


def _depthwise_strided(xp: np.ndarray, w: np.ndarray, win: Window, out: np.ndarray) -> None:
    """Depthwise conv of any rank over strided tap views of the padded input."""
    channel = (slice(None), slice(None))
    bcast = (1, w.shape[0]) + (1,) * len(win.kernel)
    tmp = scratch("taps", out.shape, out.dtype)
    for i, tap in enumerate(win.taps):
        wt = w.reshape(w.shape[0], -1)[:, i].reshape(bcast)
        src = xp[channel + win.tap_slices(tap)]
        if i == 0:
            np.multiply(src, wt, out=out)
        else:
            np.multiply(src, wt, out=tmp)
            out += tmp


def _im2col_strided(
    xp: np.ndarray, wg: np.ndarray, win: Window, group: int, out: np.ndarray
) -> None:
    n, c = xp.shape[:2]
    cg = c // group
    rank = len(win.kernel)
    sp = xp.strides[2:]
    # View (N, G, Cg, *kernel, *out) over the padded input: no copy until reshape.
    view = as_strided(
        xp,
        shape=(n, group, cg, *win.kernel, *win.out),
        strides=(
            xp.strides[0],
            cg * xp.strides[1],
            xp.strides[1],
            *(s * d for s, d in zip(sp, win.dilations)),
            *(s * t for s, t in zip(sp, win.strides)),
        ),
        writeable=False,
    )
    k = wg.shape[2]
    per_row = math.prod(win.out[1:])
    rows = max(1, min(win.out[0], _COLS_BUDGET // max(1, group * k * per_row)))
    flat = out.reshape(n, group, wg.shape[1], -1)
    lead = (slice(None),) * (2 + rank)  # group, channel, kernel axes
    for i in range(n):
        for r0 in range(0, win.out[0], rows):
            r1 = min(win.out[0], r0 + rows)
            block = view[i][(*lead, slice(r0, r1))]
            cols = scratch("cols", block.shape, xp.dtype)
            np.copyto(cols, block)
            cols = cols.reshape(group, k, -1)
            np.matmul(wg, cols, out=flat[i, :, :, r0 * per_row : r1 * per_row])
