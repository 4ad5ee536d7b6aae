"""Comparisons, boolean logic, bitwise ops and Where (numpy broadcasting throughout)."""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import helper
from spawnml.op import HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .binary import BinaryOp, binary
from .common import (
    KERNEL_DTYPES,
    binary_map_params,
    broadcast_shapes,
    check_dtype,
    same_dtype,
    ternary_map,
)
from .unary_base import NUMERIC, SIGNED_INTS, UNSIGNED_INTS, UnaryOp, sample, unary

BOOL = (DType.bool,)
INTS = SIGNED_INTS + UNSIGNED_INTS

# ------------------------------------------------------------------------------ helpers


@helper
def _eq(a, b):
    return a == b


@helper
def _lt(a, b):
    return a < b


@helper
def _le(a, b):
    return a <= b


@helper
def _gt(a, b):
    return a > b


@helper
def _ge(a, b):
    return a >= b


@helper
def _and(a, b):
    return a & b  # on bools '&' is logical and; on integers, bitwise


@helper
def _or(a, b):
    return a | b


@helper
def _xor(a, b):
    return a ^ b


@helper
def _not(v):
    return not v


@helper
def _invert(v):
    return ~v


@helper
def _where(c, x, y):
    return x if c else y


@helper
def _shift(a, b, p):
    # p = (left?, bit width of the storage type, signed?); out-of-range shift counts give
    # the sign fill alone; the count is clamped first because C/WGSL shifts are undefined
    # (or wrap) at >= the width of the computing type.
    ok = b >= 0 and b < p[1]
    s = b if ok else b * 0
    shifted = a << s if p[0] != 0 else a >> s
    fill = (a * 0 - 1 if a < 0 else a * 0) if p[0] == 0 and p[2] != 0 else a * 0
    return shifted if ok else fill


# ---------------------------------------------------------------------------------- ops



class _EqualOp(BinaryOp):
    """Equal also compares string tensors (opset 19+), on the host: no device stores them."""

    def check(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        if len(inputs) == 2 and all(i is not None and i.dtype.is_string for i in inputs):
            if node.opset < 19:
                raise self.fail(node, "string inputs need opset 19")
            return DType.bool
        return super().check(node, inputs)

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        if inputs[0] is not None and inputs[0].dtype.is_string:
            raise HostOnly(f"{node.describe()}: string comparisons run on the host")
        return super().lower(node, inputs, outputs, values)

    def cases(self) -> list[OpCase]:
        words = np.array([["a", "bé"], ["", "c"]], dtype=object)
        return [*super().cases(),
                OpCase("strings_bcast", [words, np.array(["bé"], dtype=object)])]


_CMP = dict(dtypes=NUMERIC, out_dtype=DType.bool)
Equal = binary("Equal", 1, _eq, np.equal, NUMERIC + BOOL, base=_EqualOp, out_dtype=DType.bool)
Less = binary("Less", 1, _lt, np.less, **_CMP)
LessOrEqual = binary("LessOrEqual", 12, _le, np.less_equal, **_CMP)
Greater = binary("Greater", 1, _gt, np.greater, **_CMP)
GreaterOrEqual = binary("GreaterOrEqual", 12, _ge, np.greater_equal, **_CMP)
And = binary("And", 1, _and, np.logical_and, BOOL)
Or = binary("Or", 1, _or, np.logical_or, BOOL)
Xor = binary("Xor", 1, _xor, np.logical_xor, BOOL)
BitwiseAnd = binary("BitwiseAnd", 18, _and, np.bitwise_and, INTS)
BitwiseOr = binary("BitwiseOr", 18, _or, np.bitwise_or, INTS)
BitwiseXor = binary("BitwiseXor", 18, _xor, np.bitwise_xor, INTS)


class _UnaryCases(UnaryOp):
    """Unary ops over bools/integers: cases from the op's dtypes rather than floats."""

    def cases(self) -> list[OpCase]:
        cases = []
        for dt in self.dtypes:
            if dt in KERNEL_DTYPES:
                lo = 0 if dt.is_unsigned_int else -100
                cases += [OpCase(f"{dt}", [sample((3, 4), dt.numpy, lo, 100, 1)]),
                          OpCase(f"{dt}_scalar", [sample((), dt.numpy, lo, 100, 2)]),
                          OpCase(f"{dt}_empty", [np.zeros((2, 0), dt.numpy)])]
        return cases


Not = unary("Not", 1, _not, np.logical_not, BOOL, base=_UnaryCases)
BitwiseNot = unary("BitwiseNot", 18, _invert, np.invert, INTS, base=_UnaryCases)


class BitShift(BinaryOp):
    """Shifts by per-element counts; signed types from opset 28 (arithmetic right shift)."""

    op_type = "BitShift"
    since_version = 11
    dtypes = UNSIGNED_INTS + SIGNED_INTS
    value_range = (0.0, 9.0)

    def direction(self, node: Node) -> str:
        d = self.attr(node, "direction", required=True)
        if d not in ("LEFT", "RIGHT"):
            raise self.fail(node, f"attribute 'direction' must be 'LEFT' or 'RIGHT', got {d!r}")
        return d

    def check(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        dt = super().check(node, inputs)
        self.direction(node)
        if dt.is_signed_int and node.opset < 28:
            raise self.fail(node, f"dtype {dt} needs opset 28 (unsigned types only before)")
        return dt

    def numpy(self, node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(a, b)
        bits = a.dtype.itemsize * 8
        ok = (b >= 0) & (b < bits)
        s = np.where(ok, b, 0).astype(a.dtype)
        if self.direction(node) == "LEFT":
            u = np.dtype(f"u{a.dtype.itemsize}")
            shifted = np.left_shift(a.view(u) if a.dtype.kind == "i" else a, s.astype(u))
            shifted = shifted.view(a.dtype) if a.dtype.kind == "i" else shifted
            fill = np.zeros_like(a)
        else:
            shifted = np.right_shift(a, s)
            fill = np.where(a < 0, -1, 0).astype(a.dtype)
        return np.where(ok, shifted, fill)

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        dt = inputs[0].dtype
        params = (int(self.direction(node) == "LEFT"), dt.itemsize * 8, int(dt.is_signed_int))
        low = Lowering()
        low.launch(binary_map_params, [In(0), In(1)], Out(0), fn=_shift, params=params)
        return low

    def case_attrs(self) -> list[dict[str, Any]]:
        return [{"direction": "LEFT"}, {"direction": "RIGHT"}]

    def cases(self) -> list[OpCase]:
        cases = []
        for dt in (DType.uint8, DType.uint16, DType.uint32, DType.int8, DType.int32, DType.int64):
            lo = 0 if dt.is_unsigned_int else -100
            x = sample((2, 5), dt.numpy, lo, 100, 1)
            n = dt.itemsize * 8
            counts = np.array([0, 1, n - 1, n, n + 3], dt.numpy) if dt.is_unsigned_int else \
                np.array([0, 1, n - 1, n, -2], dt.numpy)
            for d in ("LEFT", "RIGHT"):
                cases.append(OpCase(f"{dt}_{d}", [x, counts], {"direction": d}, opset=28))
        x = sample((3, 4), np.uint8, 0, 255, 2)
        cases += [
            OpCase("scalar_count", [x, np.array(2, np.uint8)], {"direction": "LEFT"}, opset=11),
            OpCase("empty", [np.zeros((0, 4), np.uint8), np.array([1], np.uint8)],
                   {"direction": "RIGHT"}, opset=11),
        ]
        return cases


class Where(OpDef):
    """out = x where condition else y; all three broadcast together."""

    op_type = "Where"
    since_version = 9

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if len(inputs) != 3 or any(i is None for i in inputs):
            raise self.fail(node, "expects inputs condition, X and Y")
        c, x, y = inputs
        if c.dtype != DType.bool:  # type: ignore[union-attr]
            raise self.fail(node, f"condition must be bool, got {c.dtype}")  # type: ignore[union-attr]
        dt = same_dtype(node, [x, y])
        check_dtype(node, dt, KERNEL_DTYPES)
        return [TensorInfo(dt, broadcast_shapes(node, c.shape, x.shape, y.shape))]  # type: ignore[union-attr]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        c, x, y = (np.asarray(a) for a in inputs)
        return [np.where(c, x, y).astype(x.dtype)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(ternary_map, [In(0), In(1), In(2)], Out(0), fn=_where)
        return low

    def cases(self) -> list[OpCase]:
        c = sample((2, 1, 4), bool, seed=1)
        x = sample((3, 4), np.float32, seed=2)
        y = sample((4,), np.float32, seed=3)
        return [
            OpCase("bcast3", [c, x, y]),
            OpCase("scalar_cond", [np.array(True), x, y]),
            OpCase("scalar_xy", [c, np.array(1.0, np.float32), np.array(-1.0, np.float32)]),
            OpCase("empty", [np.zeros((0, 4), bool), x[:1], y]),
            OpCase("i64", [c, sample((3, 4), np.int64, -9, 9, 4), np.array([7], np.int64)]),
            OpCase("bool", [c, sample((4,), bool, seed=5), sample((3, 1), bool, seed=6)]),
            OpCase("u8", [c[0], sample((4,), np.uint8, 0, 255, 7), np.array(3, np.uint8)]),
            OpCase("f16", [c, x.astype(np.float16), y.astype(np.float16)]),
        ]


OPS: list[type[OpDef]] = [
    Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or, Xor, Not,
    BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitShift, Where,
]
