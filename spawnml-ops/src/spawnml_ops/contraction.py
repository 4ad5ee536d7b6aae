"""One generic tensor-contraction kernel behind MatMul, Gemm and Einsum.

A contraction names every axis with a label. An output element fixes the output labels;
the kernel sums over the other labels (up to ``MAX_REDUCED``, as nested loops with
compile-time bounds, so the cpu backend reduces them at once). Each operand is addressed
by one coefficient per output label and per reduced label (the sum of its strides along
axes with that label: repeated labels read diagonals, size-1 axes broadcast with 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.kernel import Helper, Output, Tensor, cast, f32, helper, kernel, static_range
from spawnml.op import Launch, Node, Ref

from .common import broadcast_offset
from .fused import NO_ACTIVATION, apply_activation

MAX_REDUCED = 4


@helper
def load_as(a, i, fp, out):
    """a.flat[i] in the accumulation type: f32 for floats, the output type otherwise."""
    if fp:
        return cast(a.flat[i], f32)
    else:
        return cast(a.flat[i], out.dtype)


@helper
def zero_as(fp, out):
    """0 in the accumulation type (reads nothing: operands may be empty)."""
    if fp:
        return cast(0.0, f32)
    else:
        return cast(0, out.dtype)


@kernel
def contract(
    a: Tensor, b: Tensor, c: Tensor, out: Output, a_out: tuple, b_out: tuple, a_red: tuple,
    b_red: tuple, red: tuple, two: bool, fp: bool, alpha: float, beta: float, has_c: bool,
    act: Helper, act_params: tuple, act_arity: int,
):
    """out = act(alpha * sum_red(a * b) + beta * c) (b only when ``two``; c broadcast; act: a
    fused activation, see fused.py)."""
    oa = 0
    ob = 0
    for d in static_range(out.ndim):
        oa = oa + out.index[d] * a_out[d]
        ob = ob + out.index[d] * b_out[d]
    acc = zero_as(fp, out)
    for r0 in range(red[0]):
        for r1 in range(red[1]):
            for r2 in range(red[2]):
                for r3 in range(red[3]):
                    ia = oa + r0 * a_red[0] + r1 * a_red[1] + r2 * a_red[2] + r3 * a_red[3]
                    if two:
                        ib = ob + r0 * b_red[0] + r1 * b_red[1] + r2 * b_red[2] + r3 * b_red[3]
                        acc = acc + load_as(a, ia, fp, out) * load_as(b, ib, fp, out)
                    else:
                        acc = acc + load_as(a, ia, fp, out)
    if fp:
        if alpha != 1.0:
            acc = acc * alpha
        if has_c:
            acc = acc + load_as(c, broadcast_offset(c, out), fp, out) * beta
    elif has_c:  # integer Gemm: alpha == beta == 1 (checked by the op)
        acc = acc + load_as(c, broadcast_offset(c, out), fp, out)
    return cast(apply_activation(acc, act, act_params, act_arity), out.dtype)


def _coeffs(shape: Sequence[int], labels: str, wanted: Sequence[str]) -> tuple:
    strides = [int(s) for s in np.cumprod([1, *shape[::-1]])[:-1][::-1]] if shape else []
    coeff = dict.fromkeys(wanted, 0)
    for axis, label in enumerate(labels):
        if label in coeff and shape[axis] != 1:  # size-1 axes broadcast with stride 0
            coeff[label] += strides[axis]
    return tuple(coeff[w] for w in wanted)


@dataclass
class Contraction:
    """Operands (shape, labels) contracted onto ``out_labels``."""

    operands: list[tuple[tuple[int, ...], str]]
    out_labels: str

    def sizes(self, node: Node) -> dict[str, int]:
        """Each label's size (size-1 axes broadcast against larger ones)."""
        found: dict[str, int] = {}
        for shape, labels in self.operands:
            for n, label in zip(shape, labels):
                if found.get(label, 1) == 1:
                    found[label] = n
                elif n not in (1, found[label]):
                    raise InvalidModelError(f"{node.describe()}: label {label!r} has sizes "
                                            f"{found[label]} and {n}")
        return found

    def out_shape(self, node: Node) -> tuple[int, ...]:
        sizes = self.sizes(node)
        return tuple(sizes[label] for label in self.out_labels)

    def launch(
        self, node: Node, refs: Sequence[Ref], output, dtype: DType, *, alpha: float = 1.0,
        beta: float = 0.0, c: Ref | None = None, activation: dict[str, Any] | None = None,
    ) -> Launch:
        """The contract launch for one or two operands; ``activation``: the kernel arguments
        of a fused activation (fused.activation_args), none by default."""
        assert 1 <= len(self.operands) <= 2
        sizes = self.sizes(node)
        used = {lb for _, labels in self.operands for lb in labels}
        reduced = sorted(used - set(self.out_labels))
        if len(reduced) > MAX_REDUCED:
            raise UnsupportedOpError(f"{node.describe()}: contraction over {len(reduced)} labels "
                                     f"(more than {MAX_REDUCED}) is not supported")
        pad = MAX_REDUCED - len(reduced)
        coeffs = [
            (_coeffs(shape, labels, self.out_labels),
             _coeffs(shape, labels, reduced) + (0,) * pad)
            for shape, labels in self.operands
        ]
        two = len(self.operands) == 2
        b_out, b_red = coeffs[1] if two else coeffs[0]
        second = refs[1] if two else refs[0]
        return Launch(
            contract, [refs[0], second, c if c is not None else refs[0]], output,
            dict(a_out=coeffs[0][0], b_out=b_out, a_red=coeffs[0][1], b_red=b_red,
                 red=tuple(sizes[lb] for lb in reduced) + (1,) * pad, two=two,
                 fp=dtype.is_float, alpha=float(alpha), beta=float(beta), has_c=c is not None,
                 **(activation or NO_ACTIVATION)),
        )
