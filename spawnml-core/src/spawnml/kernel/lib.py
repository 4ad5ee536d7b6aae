"""Helpers that many kernels need, written in the kernel language."""

from __future__ import annotations

from .frontend import helper, static_range


@helper
def broadcast_offset(x, out):
    """Flat offset of the element of ``x`` that broadcasts (numpy rules) to this output element."""
    off = out.flat
    if x.size != out.size:  # equal sizes: x's shape is out's, so its offset is the output's
        off = 0
        for d in static_range(x.ndim):
            od = d + out.ndim - x.ndim
            if x.shape[d] != 1:
                off = off + out.index[od] * x.strides[d]
    return off
