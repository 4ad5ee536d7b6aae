"""Kernels that copy a strided view of one tensor, and how ops describe such a view.

Transpose, Slice, Split, DepthToSpace and SpaceToDepth are all "out[flat] = x[base +
sum(idx_k * stride_k)]" over a virtual shape of the output: the host computes the view,
one kernel copies it.
"""

from __future__ import annotations

from collections.abc import Sequence

from spawnml.kernel import Output, Tensor, helper, kernel, static_range
from spawnml.op import In, Lowering, Out, Tmp

from .common import broadcast_offset


@kernel
def strided_view(x: Tensor, out: Output, base: int, vshape: tuple, vstrides: tuple):
    """``vshape``/``vstrides`` list the virtual output axes innermost first."""
    off = base
    rem = out.flat
    for j in static_range(len(vshape)):
        off = off + (rem % vshape[j]) * vstrides[j]
        rem = rem // vshape[j]
    return x.flat[off]


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def launch_view(low: Lowering, src: In | Tmp, dst: Out | Tmp, base: int,
                shape: Sequence[int], strides: Sequence[int]) -> None:
    """Copy the view (output axes ``shape`` with element ``strides`` into src) to ``dst``.

    Size-1 axes are dropped: they never move the offset."""
    keep = [(int(s), int(t)) for s, t in zip(shape, strides) if s != 1]
    low.launch(strided_view, [src], dst, base=int(base),
               vshape=tuple(s for s, _ in reversed(keep)),
               vstrides=tuple(t for _, t in reversed(keep)))


@kernel
def broadcast_copy(x: Tensor, out: Output):
    """out = x broadcast to the output shape (numpy rules)."""
    return x.flat[broadcast_offset(x, out)]


@kernel
def tile(x: Tensor, out: Output):
    off = 0
    for d in static_range(out.ndim):
        off = off + (out.index[d] % x.shape[d]) * x.strides[d]
    return x.flat[off]


@helper
def seg(t, row, p, n, inner, i):
    """Element (row, p, i) of ``t`` viewed as [outer, n, inner]."""
    return t.flat[(row * n + p) * inner + i]


@helper
def concat_pos(out, total, inner):
    """(row, position along the concat axis, inner index) of this output element."""
    return out.flat // (total * inner), (out.flat // inner) % total, out.flat % inner


@kernel
def concat2(a: Tensor, b: Tensor, out: Output, ns: tuple, inner: int):
    row, p, i = concat_pos(out, ns[0] + ns[1], inner)
    if p < ns[0]:
        return seg(a, row, p, ns[0], inner, i)
    return seg(b, row, p - ns[0], ns[1], inner, i)


@kernel
def concat3(a: Tensor, b: Tensor, c: Tensor, out: Output, ns: tuple, inner: int):
    row, p, i = concat_pos(out, ns[0] + ns[1] + ns[2], inner)
    if p < ns[0]:
        return seg(a, row, p, ns[0], inner, i)
    if p < ns[0] + ns[1]:
        return seg(b, row, p - ns[0], ns[1], inner, i)
    return seg(c, row, p - ns[0] - ns[1], ns[2], inner, i)


@kernel
def concat4(a: Tensor, b: Tensor, c: Tensor, d: Tensor, out: Output, ns: tuple, inner: int):
    row, p, i = concat_pos(out, ns[0] + ns[1] + ns[2] + ns[3], inner)
    if p < ns[0]:
        return seg(a, row, p, ns[0], inner, i)
    if p < ns[0] + ns[1]:
        return seg(b, row, p - ns[0], ns[1], inner, i)
    if p < ns[0] + ns[1] + ns[2]:
        return seg(c, row, p - ns[0] - ns[1], ns[2], inner, i)
    return seg(d, row, p - ns[0] - ns[1] - ns[2], ns[3], inner, i)


CONCAT_KERNELS = {2: concat2, 3: concat3, 4: concat4}
