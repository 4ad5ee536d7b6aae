"""Kernels of the normalisation family: statistics into a temporary, then an apply pass.

``norm_stats`` writes (mean, 1/std) per row of a (rows, 2) temporary, where a row is one
position of the kept axes and the statistics run over the reduced axes; ``norm_apply``
normalises every element with its row's statistics and an optional scale and bias.
Axes are merged into at most three (size, stride) groups on each side first
(``split_axes``), so the loops have compile-time bounds and affine reads.
"""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from collections.abc import Sequence

from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, f32, kernel, static_range
from spawnml.op import Node

from .common import broadcast_offset

MAX_GROUPS = 3
PARAM_NONE, PARAM_BROADCAST, PARAM_INDEXED = 0, 1, 2


def split_axes(
    node: Node, shape: Sequence[int], reduced: Sequence[int]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(kept, reduced) lists of (size, stride) groups: adjacent axes of one kind merged,
    size-1 axes dropped."""
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i], acc = acc, acc * shape[i]
    kept: list[tuple[int, int]] = []
    red: list[tuple[int, int]] = []
    last = None
    for i, n in enumerate(shape):
        if n == 1:
            continue
        kind = i in reduced
        groups = red if kind else kept
        if last == kind and groups:
            size, _ = groups[-1]
            groups[-1] = (size * n, strides[i])
        else:
            groups.append((n, strides[i]))
        last = kind
    if len(red) > MAX_GROUPS or len(kept) > MAX_GROUPS:
        raise UnsupportedOpError(f"{node.describe()}: normalising over axes {list(reduced)} of "
                                 f"shape {list(shape)} needs more than {MAX_GROUPS} axis groups")
    return kept, red


def _row_major(sizes: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(sizes):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def stats_consts(kept, red, eps: float, eps_outside_sqrt: bool = False) -> dict:
    """Constants of ``norm_stats`` for groups from ``split_axes``."""
    pad = [(1, 0)] * (MAX_GROUPS - len(red))
    rs = [*pad, *red]
    return dict(
        keep_size=tuple(n for n, _ in kept), keep_stride=tuple(s for _, s in kept),
        keep_div=_row_major([n for n, _ in kept]),
        red_size=tuple(n for n, _ in rs), red_stride=tuple(s for _, s in rs),
        count=max(1, int(_prod(n for n, _ in red))), eps=float(eps),
        eps_outside_sqrt=eps_outside_sqrt,
    )


def apply_consts(kept, **extra) -> dict:
    """Constants of ``norm_apply``: how an element finds its statistics row."""
    return dict(keep_size=tuple(n for n, _ in kept), keep_stride=tuple(s for _, s in kept),
                keep_div=_row_major([n for n, _ in kept]), **extra)


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


@kernel
def norm_stats(
    x: Tensor, out: Output, keep_size: tuple, keep_stride: tuple, keep_div: tuple,
    red_size: tuple, red_stride: tuple, count: int, eps: float, eps_outside_sqrt: bool,
):
    """out[r, 0] = mean, out[r, 1] = 1 / sqrt(var + eps) (or 1 / (std + eps)) of row r."""
    r = out.index[0]
    base = 0
    if len(keep_size) == 1:
        base = r * keep_stride[0]
    else:
        for d in static_range(len(keep_size)):
            base = base + ((r // keep_div[d]) % keep_size[d]) * keep_stride[d]
    s = 0.0
    for r0 in range(red_size[0]):
        for r1 in range(red_size[1]):
            for r2 in range(red_size[2]):
                i = base + r0 * red_stride[0] + r1 * red_stride[1] + r2 * red_stride[2]
                s = s + cast(x.flat[i], f32)
    mean = s / cast(count, f32)
    q = 0.0
    for r0 in range(red_size[0]):
        for r1 in range(red_size[1]):
            for r2 in range(red_size[2]):
                i = base + r0 * red_stride[0] + r1 * red_stride[1] + r2 * red_stride[2]
                dv = cast(x.flat[i], f32) - mean
                q = q + dv * dv
    var = q / cast(count, f32)
    inv = 1.0 / (sqrt(var) + eps) if eps_outside_sqrt else 1.0 / sqrt(var + eps)
    # One exit, no early return: the cpu backend then reduces both loops at once.
    return mean if out.index[1] == 0 else inv


@kernel
def norm_apply(
    x: Tensor, stats: Tensor, scale: Tensor, bias: Tensor, out: Output, keep_size: tuple,
    keep_stride: tuple, keep_div: tuple, param_mode: int, param_div: int, param_mod: int,
    has_bias: bool, center: bool, divide: bool, scale_normalized: bool,
):
    """(x - mean) * inv_std per row, then * scale + bias (broadcast, or indexed by
    ``(flat // param_div) % param_mod``). ``scale_normalized`` rounds the normalised value
    to the output type before scaling (LayerNormalization's stash_type semantics)."""
    f = out.flat
    row = 0
    for d in static_range(len(keep_size)):
        row = row + ((f // keep_stride[d]) % keep_size[d]) * keep_div[d]
    v = cast(x.flat[f], f32)
    if center:
        v = v - stats.flat[row * 2]
    if divide:
        v = v * stats.flat[row * 2 + 1]
    if scale_normalized:
        v = cast(cast(v, out.dtype), f32)
    if param_mode == 1:
        v = v * cast(scale.flat[broadcast_offset(scale, out)], f32)
        if has_bias:
            v = v + cast(bias.flat[broadcast_offset(bias, out)], f32)
    elif param_mode == 2:
        p = (f // param_div) % param_mod
        v = v * cast(scale.flat[p], f32)
        if has_bias:
            v = v + cast(bias.flat[p], f32)
    return cast(v, out.dtype)


@kernel
def stats_column(stats: Tensor, out: Output, column: int):
    """One column of a (rows, 2) statistics temporary, reshaped to ``out``."""
    return cast(stats.flat[out.flat * 2 + column], out.dtype)


@kernel
def batch_norm(
    x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor, out: Output,
    param_div: int, param_mod: int, eps: float,
):
    """Inference BatchNormalization; parameters indexed by ``(flat // div) % mod``."""
    p = (out.flat // param_div) % param_mod
    inv = 1.0 / sqrt(cast(var.flat[p], f32) + eps)
    v = (cast(x.flat[out.flat], f32) - cast(mean.flat[p], f32)) * inv
    return cast(v * cast(scale.flat[p], f32) + cast(bias.flat[p], f32), out.dtype)


@kernel
def lrn(x: Tensor, out: Output, size: int, alpha: float, beta: float, bias: float):
    """Local response normalisation across channels (axis 1)."""
    c = out.index[1]
    cs = x.strides[1]
    lo = c - (size - 1) // 2
    acc = 0.0
    for k in range(size):
        ck = lo + k
        if 0 <= ck < x.shape[1]:
            v = cast(x.flat[out.flat + (ck - c) * cs], f32)
            acc = acc + v * v
    base = bias + alpha / cast(size, f32) * acc
    return cast(cast(x.flat[out.flat], f32) / pow(base, beta), out.dtype)


@kernel
def lp_normalize(x: Tensor, out: Output, axis: int, p: int):
    """x / ||x||_p along ``axis`` (p 1 or 2); zero norms divide by 1. The 2-norm is taken of
    x / max|x| (as BLAS nrm2), so squares of tiny or huge values neither underflow nor
    overflow."""
    n = x.shape[axis]
    st = x.strides[axis]
    base = out.flat - out.index[axis] * st
    scale = 1.0
    if p == 2:
        top = 0.0
        for k in range(n):
            top = max(top, abs(cast(x.flat[base + k * st], f32)))
        # a zero, NaN or infinite maximum keeps the plain sum (0, NaN and inf as it gives)
        scale = top if top > 0.0 and not isinf(top) else 1.0
    acc = 0.0
    for k in range(n):
        v = cast(x.flat[base + k * st], f32)
        if p == 1:
            acc = acc + abs(v)
        else:
            v = v / scale
            acc = acc + v * v
    norm = acc if p == 1 else sqrt(acc) * scale
    norm = 1.0 if norm == 0.0 else norm  # an all-zero slice stays zero (as onnx.reference)
    return cast(cast(x.flat[out.flat], f32) / norm, out.dtype)
