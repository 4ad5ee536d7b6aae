"""Sampling: GridSample and AffineGrid (plus RoiAlign and DeformConv from ``misc_roi``).

GridSample follows onnx.reference (PyTorch's grid_sampler): grid coordinates in [-1, 1]
are denormalised per axis (``align_corners``), out-of-range coordinates are clamped
(``border``) or reflected (``reflection``), then sampled with nearest (round half to even),
linear (2^k taps) or cubic (Keys, a = -0.75, 4x4 taps) interpolation; taps outside the
image read 0 (``zeros``), the clamped or the reflected pixel.

Non-finite grid values: a tap is inside the image only when its (float) coordinate is, so
with ``zeros`` padding a NaN or ±Inf grid coordinate samples nothing and its output is 0
(PyTorch's behaviour; the integer conversion of such a coordinate, unspecified, is never
relied on); with ``border`` and ``reflection`` a NaN coordinate gives NaN.
"""

# ruff: noqa: F821  (kernel intrinsics are resolved by the kernel front end)
from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel, static_range
from spawnml.op import HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import input_ints, require_values, static
from .misc_roi import DeformConv, RoiAlign

FLOATS = (DType.float32, DType.float16, DType.float64)
MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
CUBIC_A = -0.75


def _str(op: OpDef, node: Node, name: str, default: str) -> str:
    v = op.attr(node, name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


# ------------------------------------------------------------------------ GridSample kernel


@helper
def reflect(x, lo, hi):
    """Reflect ``x`` at the borders [lo, hi] until it lies inside (f32)."""
    span = hi - lo
    below = x < lo
    dx = lo - x if below else x - hi
    k = floor(dx / span)
    r = dx - k * span
    even = pymod(k, 2.0) == 0.0
    folded = (lo + r if even else hi - r) if below else (hi - r if even else lo + r)
    return x if (x >= lo and x <= hi) else folded


@helper
def source_coord(g, size, align, mode, padding):
    """The pixel-space coordinate of normalised grid value ``g`` along an axis of ``size``."""
    lo = 0.0 if align else -0.5
    hi = size - 1.0 if align else size - 0.5
    v = (g + 1.0) * 0.5 * (size - 1.0) if align else ((g + 1.0) * size - 1.0) * 0.5
    if mode == 0:
        v = round(v)
    if padding == 1:
        v = min(max(v, 0.0), size - 1.0) if (v < lo or v > hi) else v
    if padding == 2:
        v = reflect(v, lo, hi)
    return v


@helper
def tap_index(i, size, padding, align):
    """The in-range index read for integer tap ``i`` (reads of invalid taps are masked)."""
    lo = 0.0 if align else -0.5
    hi = size - 1.0 if align else size - 0.5
    j = i
    if padding == 2:
        j = cast(reflect(cast(i, f32), lo, hi), i32)
    return min(max(j, 0), size - 1)


@helper
def to_index(v):
    """``v`` (f32) as an i32 index; a non-finite ``v`` (unspecified to convert) reads 0."""
    return cast(v if isfinite(v) else 0.0, i32)


@helper
def tap_ok(v, size, padding):
    """Whether the tap at float coordinate ``v`` reads the image (False for NaN/±Inf)."""
    return padding != 0 or (v >= 0.0 and v < cast(size, f32))


@helper
def cubic_weight(s):
    """Keys' cubic convolution weight at distance ``s`` (a = -0.75)."""
    a = -0.75
    s = abs(s)
    near = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0
    far = ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a
    return near if s <= 1.0 else far


@helper
def linear_weight(t, k):
    return 1.0 - t if k == 0 else t


@kernel
def grid_sample(x: Tensor, grid: Tensor, out: Output, nd: int, mode: int, padding: int,
                align: bool):
    """One output element of 2-D (nd=2) or 3-D (nd=3) GridSample."""
    c_n = x.shape[1]
    s_out = out.size // (out.shape[0] * c_n)
    n = out.flat // (c_n * s_out)
    c = (out.flat // s_out) % c_n
    g = (n * s_out + out.flat % s_out) * nd
    w_n = x.shape[nd + 1]
    h_n = x.shape[nd]
    d_n = x.shape[2] if nd == 3 else 1
    fx = source_coord(cast(grid.flat[g], f32), w_n, align, mode, padding)
    fy = source_coord(cast(grid.flat[g + 1], f32), h_n, align, mode, padding)
    fz = 0.0
    if nd == 3:
        fz = source_coord(cast(grid.flat[g + 2], f32), d_n, align, mode, padding)
    base = (n * c_n + c) * d_n * h_n * w_n
    if mode == 0:
        ix = to_index(fx)
        iy = to_index(fy)
        iz = to_index(fz)
        ok = tap_ok(fx, w_n, padding) and tap_ok(fy, h_n, padding) and tap_ok(fz, d_n, padding)
        off = (tap_index(iz, d_n, padding, align) * h_n + tap_index(iy, h_n, padding, align)
               ) * w_n + tap_index(ix, w_n, padding, align)
        v = cast(x.flat[base + off], f32)
        return cast(v if ok else 0.0, out.dtype)
    x0 = floor(fx)
    y0 = floor(fy)
    z0 = floor(fz)
    tx = fx - x0
    ty = fy - y0
    tz = fz - z0
    acc = 0.0
    if mode == 1:
        for kz in static_range(2 if nd == 3 else 1):
            for ky in static_range(2):
                for kx in static_range(2):
                    ix = to_index(x0) + kx
                    iy = to_index(y0) + ky
                    iz = to_index(z0) + kz
                    wz = linear_weight(tz, kz) if nd == 3 else 1.0
                    w = linear_weight(tx, kx) * linear_weight(ty, ky) * wz
                    ok = tap_ok(x0 + kx, w_n, padding) and tap_ok(y0 + ky, h_n, padding) \
                        and tap_ok(z0 + kz, d_n, padding)
                    off = (tap_index(iz, d_n, padding, align) * h_n
                           + tap_index(iy, h_n, padding, align)) * w_n \
                        + tap_index(ix, w_n, padding, align)
                    v = cast(x.flat[base + off], f32)
                    acc = acc + (w * v if ok else 0.0)
        return cast(acc, out.dtype)
    for ky in static_range(4):
        for kx in static_range(4):
            ix = to_index(x0) + (kx - 1)
            iy = to_index(y0) + (ky - 1)
            w = cubic_weight(tx - (kx - 1.0)) * cubic_weight(ty - (ky - 1.0))
            ok = tap_ok(x0 + (kx - 1.0), w_n, padding) and tap_ok(y0 + (ky - 1.0), h_n, padding)
            off = tap_index(iy, h_n, padding, align) * w_n + tap_index(ix, w_n, padding, align)
            v = cast(x.flat[base + off], f32)
            acc = acc + (w * v if ok else 0.0)
    return cast(acc, out.dtype)


# --------------------------------------------------------------------- GridSample reference


def _reflect_np(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    below = x < lo
    with np.errstate(all="ignore"):
        dx = np.where(below, lo - x, x - hi)
        k = np.floor(dx / span)
        r = dx - k * span
    even = np.mod(k, 2) == 0
    folded = np.where(below, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
    return np.where((x >= lo) & (x <= hi), x, folded)


def _grid_sample_np(x: np.ndarray, grid: np.ndarray, mode: int, padding: int,
                    align: bool) -> np.ndarray:
    nd = x.ndim - 2
    sizes = x.shape[2:]
    coords, bounds = [], []
    for i, size in enumerate(sizes):
        g = grid[..., nd - 1 - i].astype(np.float64)
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        v = ((g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2)
        v = v.astype(np.float32).astype(np.float64)
        if mode == 0:
            v = np.rint(v)
        out = (v < lo) | (v > hi)
        if padding == 1:
            v = np.where(out, np.clip(v, 0, size - 1), v)
        elif padding == 2:
            v = _reflect_np(v, lo, hi)
        coords.append(v)
        bounds.append((lo, hi))
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))

    def fetch(at: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(the values at float tap coordinates ``at``, (N, C, *S_out); whether each tap
        reads the image: False outside it with zeros padding, NaN and ±Inf included)."""
        ok = np.ones(at[0].shape, bool)
        safe = []
        for i, (f, size) in enumerate(zip(at, sizes)):
            with np.errstate(invalid="ignore"):
                if padding == 0:
                    ok &= (f >= 0) & (f < size)
                # non-finite coordinates read any in-range pixel (masked or NaN-weighted)
                j = np.where(np.isfinite(f), f, 0).astype(np.int64)
            if padding == 2:
                j = _reflect_np(j.astype(np.float64), *bounds[i]).astype(np.int64)
            safe.append(np.clip(j, 0, size - 1))
        v = x[(n_idx, slice(None), *safe)]  # (N, *S_out, C)
        return np.moveaxis(v, -1, 1).astype(np.float64), ok[:, None]

    if mode == 0:
        v, ok = fetch(coords)
        return np.where(ok, v, 0.0)
    taps = (0, 1) if mode == 1 else (-1, 0, 1, 2)
    base = [np.floor(v) for v in coords]
    acc = 0.0
    for combo in np.ndindex(*([len(taps)] * nd)):
        w = 1.0
        idx = []
        for i, k in enumerate(combo):
            t = coords[i] - base[i]
            s = np.abs(t - taps[k])
            if mode == 1:
                w = w * (1 - s)
            else:
                a = CUBIC_A
                w = w * np.where(s <= 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                                 ((a * s - 5 * a) * s + 8 * a) * s - 4 * a)
            idx.append(base[i] + taps[k])
        v, ok = fetch(idx)
        with np.errstate(invalid="ignore"):
            acc = acc + np.where(ok, w[:, None] * v, 0.0)  # a tap outside adds 0, not w * 0
    return acc


class GridSample(OpDef):
    op_type = "GridSample"
    since_version = 16
    dtypes = (DType.float32,)
    # grid values become pixel indices: the suite's generic NaN/±Inf/huge injection there
    # would test unspecified conversions (and float32 reflection of 1e10 has no precision);
    # the defined non-finite behaviour is covered by the ``nonfinite_grid_*`` cases
    edge_unspecified_inputs = (1,)

    def _check(self, node: Node, inputs) -> tuple[int, int, bool]:
        x, grid = ([*inputs, None, None])[:2]
        if x is None or grid is None:
            raise self.fail(node, "inputs X and grid are required")
        if x.dtype not in FLOATS or grid.dtype not in FLOATS:
            raise self.fail(node, "X and grid must be float tensors")
        if x.shape is None or grid.shape is None or len(x.shape) < 3 \
                or len(grid.shape) != len(x.shape):
            raise self.fail(node, f"X {x.shape} and grid {grid.shape} need equal ranks >= 3")
        nd = len(x.shape) - 2
        if grid.shape[-1] not in (nd, None) or grid.shape[0] != x.shape[0]:
            raise self.fail(node, f"grid {grid.shape} must be (N, ..., {nd}) for X {x.shape}")
        mode = _str(self, node, "mode", "linear" if node.opset >= 20 else "bilinear")
        padding = _str(self, node, "padding_mode", "zeros")
        if mode not in MODES or padding not in PADDINGS:
            raise self.fail(node, f"unknown mode {mode!r} or padding_mode {padding!r}")
        return MODES[mode], PADDINGS[padding], bool(self.attr(node, "align_corners", 0))

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        x, grid = inputs[0], inputs[1]
        return [TensorInfo(x.dtype, (x.shape[0], x.shape[1], *grid.shape[1:-1]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        mode, padding, align = self._check(node, array_infos(inputs))
        x = np.asarray(inputs[0])
        return [_grid_sample_np(x, np.asarray(inputs[1]), mode, padding, align).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        mode, padding, align = self._check(node, inputs)
        nd = len(static(inputs[0])) - 2
        if nd not in (2, 3) or (nd == 3 and mode == 2):
            raise HostOnly(f"{node.describe()}: the GridSample kernel covers 2-D and 3-D "
                           "(linear/nearest) sampling; this node runs on the host")
        low = Lowering()
        low.launch(grid_sample, [In(0), In(1)], Out(0), nd=nd, mode=mode, padding=padding,
                   align=align)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(5)
        x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
        grid = rng.uniform(-1.4, 1.4, (2, 3, 6, 2)).astype(np.float32)
        x3 = rng.standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
        grid3 = rng.uniform(-1.3, 1.3, (1, 2, 3, 2, 3)).astype(np.float32)
        out = []
        for mode in ("nearest", "linear", "cubic"):
            for pad in PADDINGS:
                for align in (0, 1):
                    out.append(OpCase(f"{mode}_{pad}_align{align}", [x, grid],
                                      {"mode": mode, "padding_mode": pad,
                                       "align_corners": align}, atol=1e-5))
        for mode in ("nearest", "linear"):
            for pad in PADDINGS:
                out.append(OpCase(f"3d_{mode}_{pad}", [x3, grid3],
                                  {"mode": mode, "padding_mode": pad}, atol=1e-5))
        out.append(OpCase("opset16_bilinear", [x, grid], {"mode": "bilinear"}, opset=16))
        bad = grid.copy()
        bad[0, 0, :5, 0] = [np.nan, np.inf, -np.inf, 1e10, 0.3]
        bad[1, 2, :3, 1] = [np.nan, -np.inf, -1e10]
        bad[1, 1, 0, :] = np.nan
        for mode in ("nearest", "linear", "cubic"):
            out.append(OpCase(f"nonfinite_grid_{mode}_zeros", [x, bad],
                              {"mode": mode, "padding_mode": "zeros"}, atol=1e-5))
        finite_big = np.where(np.abs(bad) == 1e10, 0.9, bad).astype(np.float32)
        for pad in ("border", "reflection"):  # NaN gives NaN, ±Inf clamps or NaN
            # (no 1e10: float32 cannot reflect it back into the image meaningfully)
            out.append(OpCase(f"nonfinite_grid_linear_{pad}", [x, finite_big],
                              {"mode": "linear", "padding_mode": pad}))
        return out


# --------------------------------------------------------------------------- AffineGrid


@kernel
def affine_grid(theta: Tensor, out: Output, nd: int, align: bool):
    """out[n, (d,) h, w, k] = theta[n, k, :] . (x, y, (z,) 1) at the base grid point."""
    k = out.flat % nd
    pos = out.flat // nd
    row = (pos // (out.size // (out.shape[0] * nd))) * (nd * (nd + 1)) + k * (nd + 1)
    acc = cast(theta.flat[row + nd], f32)
    rest = pos
    for i in static_range(nd):
        size = out.shape[nd - i]  # coordinate i (x, y, z) runs along the i-th last axis
        j = cast(rest % size, f32)
        rest = rest // size
        base = (2.0 * j + 1.0) / size - 1.0
        if align:
            base = 2.0 * j / (size - 1.0) - 1.0 if size > 1 else -1.0
        acc = acc + cast(theta.flat[row + i], f32) * base
    return cast(acc, out.dtype)


class AffineGrid(OpDef):
    op_type = "AffineGrid"
    since_version = 20
    value_inputs = (1,)

    def _size(self, node: Node, inputs, values) -> list[int] | None:
        theta = inputs[0] if inputs else None
        if theta is None or len(inputs) < 2 or inputs[1] is None:
            raise self.fail(node, "inputs theta and size are required")
        if theta.dtype not in FLOATS:
            raise self.fail(node, f"theta dtype {theta.dtype} is not a float type")
        size = input_ints(self, node, values, 1)
        if size is not None:
            nd = len(size) - 2
            if nd not in (2, 3) or (theta.shape is not None
                                    and tuple(theta.shape[1:]) != (nd, nd + 1)):
                raise self.fail(node, f"size {size} needs theta of shape (N, {nd}, {nd + 1})")
        return size

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        size = self._size(node, inputs, values)
        if size is None:
            return [TensorInfo(inputs[0].dtype, None)]
        return [TensorInfo(inputs[0].dtype, (size[0], *size[2:], len(size) - 2))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        theta = np.asarray(inputs[0])
        size = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
        align = bool(self.attr(node, "align_corners", 0))
        axes = []
        for n in size[2:]:
            j = np.arange(n, dtype=np.float64)
            if align:
                axes.append(-1 + 2 * j / (n - 1) if n > 1 else np.full(1, -1.0))
            else:
                axes.append((2 * j + 1) / n - 1)
        mesh = np.meshgrid(*axes, indexing="ij")  # (d,) h, w
        homo = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)  # x, y, (z,) 1
        grid = np.einsum("...j,nkj->n...k", homo, theta.astype(np.float64))
        return [grid.astype(theta.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        size = self._size(node, inputs, values)
        require_values(node, "the size input", size)
        assert size is not None
        low = Lowering()
        low.launch(affine_grid, [In(0)], Out(0), nd=len(size) - 2,
                   align=bool(self.attr(node, "align_corners", 0)))
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(6)
        t2 = rng.standard_normal((2, 2, 3)).astype(np.float32)
        t3 = rng.standard_normal((1, 3, 4)).astype(np.float32)
        return [
            OpCase("2d", [t2, np.array([2, 3, 4, 5], np.int64)]),
            OpCase("2d_align", [t2, np.array([2, 1, 3, 1], np.int64)], {"align_corners": 1}),
            OpCase("3d", [t3, np.array([1, 1, 2, 3, 4], np.int64)]),
            OpCase("3d_align", [t3, np.array([1, 1, 2, 3, 4], np.int64)],
                   {"align_corners": 1}),
        ]


OPS: list[type[OpDef]] = [GridSample, AffineGrid, RoiAlign, DeformConv]
