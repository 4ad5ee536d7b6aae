"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, plus the
index reductions and scans (ArgMax/ArgMin, CumSum, TopK) from ``reduce_index``.

Axes are an attribute before opset 13 (ReduceSum) or 18 (the others) and an input from
then on. One generic kernel reduces any set of axes: each output element walks the
reduced positions with a flat counter decomposed over the reduced axes (compile-time
shapes). Empty reductions produce the op's identity with a fill launch.
"""

# ruff: noqa: F821  (kernel intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel, static_range
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import (
    fill,
    fill_int,
    has_input,
    input_ints,
    norm_axes,
    prod,
    rank_of,
    require_values,
    static as static_dims,
)
from .reduce_index import OPS as INDEX_OPS

SUM, MEAN, MAX, MIN, PROD, L1, L2, LOGSUM, LOGSUMEXP, SUMSQUARE = range(10)
FLOAT_RESULT = (MEAN, L2, LOGSUM, LOGSUMEXP)  # computed in f32 even for integer inputs
ONE_ELEMENT_IS_ITSELF = (SUM, MEAN, MAX, MIN, PROD, LOGSUMEXP)  # reducing no axis is a copy
NUMERIC = (DType.float32, DType.float16, DType.float64, DType.bfloat16, DType.int32,
           DType.int64, DType.uint32, DType.uint8, DType.int8)


@helper
def load_acc(x, off, wide):
    """The element at ``off`` in the accumulation type: 1 f32, 2 i32 (bools), 0 its own."""
    if wide == 1:
        return cast(x.flat[off], f32)
    elif wide == 2:
        return cast(x.flat[off], i32)
    else:
        return x.flat[off]


@helper
def reduced_offset(base, r, x, red, red_shape):
    """Offset of reduced position ``r`` (a flat counter over the reduced axes, innermost first)."""
    off = base
    rem = r
    for j in static_range(len(red)):
        off = off + (rem % red_shape[j]) * x.strides[red[j]]
        rem = rem // red_shape[j]
    return off


@helper
def prepare(op, v, m):
    """The per-element term folded by the reduction."""
    if op == L1:
        return abs(v)
    elif op == L2 or op == SUMSQUARE:
        return v * v
    elif op == LOGSUMEXP:
        return exp(v - m)
    else:
        return v


@helper
def combine(op, acc, t):
    if op == MAX:
        return max(acc, t)
    elif op == MIN:
        return min(acc, t)
    elif op == PROD:
        return acc * t
    else:
        return acc + t


@kernel
def reduce_axes(x: Tensor, out: Output, kept: tuple, kept_out: tuple, red: tuple,
                red_shape: tuple, red_size: int, op: int, wide: int):
    """Reduce the axes ``red`` of ``x`` (red_size >= 1) with reduction ``op``."""
    base = 0
    for i in static_range(len(kept)):
        base = base + out.index[kept_out[i]] * x.strides[kept[i]]
    m = load_acc(x, base, wide)
    if op == LOGSUMEXP:
        for r in range(1, red_size):
            m = max(m, load_acc(x, reduced_offset(base, r, x, red, red_shape), wide))
    acc = prepare(op, m if op != LOGSUMEXP else load_acc(x, base, wide), m)
    for r in range(1, red_size):
        v = load_acc(x, reduced_offset(base, r, x, red, red_shape), wide)
        acc = combine(op, acc, prepare(op, v, m))
    if op == MEAN:
        acc = acc / cast(red_size, f32)
    if op == L2:
        acc = sqrt(acc)
    if op == LOGSUM:
        acc = log(acc)
    if op == LOGSUMEXP:
        acc = m if isinf(m) else log(acc) + m
    return cast(acc, out.dtype)


def _identity(op: int, dt: DType) -> float:
    """The result of reducing nothing (what onnx.reference gives for empty axes)."""
    if op in (SUM, L1, L2, SUMSQUARE):
        return 0.0
    if op == PROD:
        return 1.0
    if op == MEAN:
        return math.nan
    if op in (LOGSUM, LOGSUMEXP):
        return -math.inf
    if dt is DType.bool:
        return float(op == MIN)
    if dt.is_int:
        info = np.iinfo(dt.numpy)
        return float(info.min if op == MAX else info.max)
    return -math.inf if op == MAX else math.inf


class ReduceOp(OpDef):
    """A reduction over a set of axes; ``input_since`` is the opset axes became an input."""

    code: int
    input_since: int = 18
    value_inputs = (1,)

    def _axes_source(self, node: Node) -> str:
        return "input" if node.opset >= self.input_since else "attribute"

    def axes(self, node: Node, rank: int, values: Sequence[np.ndarray | None]) -> list[int] | None:
        """Reduced axes (sorted, normalised); None when the axes input is not constant."""
        if self._axes_source(node) == "attribute":
            if len(node.inputs) > 1 and node.inputs[1]:
                raise self.fail(node, f"axes is an attribute before opset {self.input_since}")
            raw = self.attr(node, "axes", None)
        elif has_input(node, 1):
            if "axes" in node.attrs:
                raise self.fail(node, f"axes is an input from opset {self.input_since}")
            raw = input_ints(self, node, values, 1)
            if raw is None:
                return None
        else:
            raw = None
        if not raw:
            if self.is_noop(node):
                return []
            return list(range(rank))
        return sorted(norm_axes(node, raw, rank))

    def is_noop(self, node: Node) -> bool:
        """Whether empty axes mean "reduce no axis" (noop_with_empty_axes) rather than "reduce
        every axis". Reducing no axis still applies the per-element part (ReduceL2's |x|,
        ReduceLogSum's log), as onnxruntime and onnx.reference do."""
        return self._axes_source(node) == "input" and \
            bool(int(self.attr(node, "noop_with_empty_axes", 0)))

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None and x.shape is not None
        if x.dtype not in NUMERIC and not (x.dtype is DType.bool and self.code in (MAX, MIN)):
            raise self.fail(node, f"dtype {x.dtype} is not supported")
        keep = int(self.attr(node, "keepdims", 1))
        if keep not in (0, 1):
            raise self.fail(node, f"keepdims must be 0 or 1, got {keep}")
        axes = self.axes(node, rank, values)
        if axes is None:
            shape = tuple([None] * rank) if keep else None
            return [TensorInfo(x.dtype, shape)]
        if keep:
            shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        else:
            shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        return [TensorInfo(x.dtype, shape)]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axes = self.axes(node, x.ndim, inputs)
        assert axes is not None
        keep = bool(self.attr(node, "keepdims", 1))
        with np.errstate(all="ignore"):
            y = self.numpy(x.astype(np.float64) if x.dtype.kind == "f" else x, tuple(axes), keep)
        return [np.asarray(y).astype(x.dtype)]

    def numpy(self, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
        c = self.code
        if 0 in [x.shape[a] for a in axes]:
            shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if keep else \
                tuple(s for d, s in enumerate(x.shape) if d not in axes)
            return np.full(shape, _identity(c, DType(x.dtype.name)))
        if c == SUM:
            return np.sum(x, axis=axes, keepdims=keep)
        if c == MEAN:
            return np.mean(x, axis=axes, keepdims=keep)
        if c == MAX:
            return np.max(x, axis=axes, keepdims=keep)
        if c == MIN:
            return np.min(x, axis=axes, keepdims=keep)
        if c == PROD:
            return np.prod(x, axis=axes, keepdims=keep)
        if c == L1:
            return np.sum(np.abs(x), axis=axes, keepdims=keep)
        if c == L2:
            return np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=axes, keepdims=keep))
        if c == LOGSUM:
            return np.log(np.sum(x, axis=axes, keepdims=keep))
        if c == LOGSUMEXP:
            m = np.max(x, axis=axes, keepdims=True)
            mm = np.where(np.isinf(m), 0, m)
            s = np.log(np.sum(np.exp(x - mm), axis=axes, keepdims=True)) + mm
            return s if keep else np.squeeze(s, axis=axes)
        return np.sum(np.square(x), axis=axes, keepdims=keep)

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        x = inputs[0]
        shape = static_dims(x)
        axes = self.axes(node, len(shape), values)
        require_values(node, "the axes input", axes)
        assert axes is not None
        low = Lowering()
        if not axes and self.code in ONE_ELEMENT_IS_ITSELF:  # the output is the input
            low.aliases[0] = 0
            return low
        red_size = prod(shape[a] for a in axes)
        if red_size == 0:
            value = _identity(self.code, x.dtype)
            if not x.dtype.is_float:
                low.launch(fill_int, [], Out(0), value=int(value))
            else:
                low.launch(fill, [], Out(0), value=value)
            return low
        keep = bool(self.attr(node, "keepdims", 1))
        kept = tuple(d for d in range(len(shape)) if d not in axes)
        kept_out = kept if keep else tuple(range(len(kept)))
        red = tuple(reversed(axes))
        wide = 2 if x.dtype is DType.bool else int(x.dtype.is_float or self.code in FLOAT_RESULT)
        low.launch(reduce_axes, [In(0)], Out(0), kept=kept, kept_out=kept_out, red=red,
                   red_shape=tuple(shape[a] for a in red), red_size=red_size, op=self.code,
                   wide=wide)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(1)
        x = rng.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)
        special = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.5], [-np.inf, -np.inf, -np.inf]],
                           np.float32)
        ints = rng.integers(-5, 6, (3, 4)).astype(np.int32)

        def axes_case(name: str, arr: np.ndarray, axes: list[int] | None, **attrs) -> OpCase:
            inputs: list[np.ndarray | None] = [arr]
            if axes is not None:
                inputs.append(np.array(axes, np.int64))
            return OpCase(name, inputs, dict(attrs), opset=18, rtol=1e-4, atol=1e-5)

        cases = [
            axes_case("all_default", x, None),
            axes_case("axis1", x, [1]),
            axes_case("neg_axes_nokeep", x, [-1, 0], keepdims=0),
            axes_case("empty_axes_noop", x, [], noop_with_empty_axes=1),
            axes_case("empty_axes_all", x, [], keepdims=0),
            axes_case("size0_axis", np.zeros((2, 0, 3), np.float32), [1]),
            axes_case("size1", x[:, :1], [1], keepdims=0),
            axes_case("int32", ints, [1]),
            # rank 0: "every axis" is none, yet L2, L1, SumSquare, LogSum still apply per element
            axes_case("rank0", np.array(-2.5 if self.code not in (LOGSUM,) else 2.5, np.float32),
                      None),
            axes_case("rank0_noop", np.array(-2.5, np.float32), [], noop_with_empty_axes=1),
            axes_case("noop_negative", np.array([[-2.5, 3.0]], np.float32), [],
                      noop_with_empty_axes=1),
            OpCase("attr_form_opset13", [x], {"axes": [0, 2], "keepdims": 0}, opset=13,
                   rtol=1e-4, atol=1e-5),
        ]
        if self.code in (SUM, MEAN, MAX, MIN, LOGSUMEXP):
            cases.append(axes_case("nan_inf", special, [1]))
        if self.code in (LOGSUMEXP, MAX):
            cases.append(axes_case("large", np.array([[1000.0, 1000.0], [-1e4, 0.0]], np.float32),
                                   [1]))
        if self.input_since == 13:
            cases = [OpCase(c.name, c.inputs, c.attrs, 13 if c.opset == 18 else 11, c.rtol, c.atol)
                     for c in cases]
        return cases


def _make(name: str, code: int, input_since: int = 18) -> type[ReduceOp]:
    return type(name, (ReduceOp,), {"op_type": name, "code": code, "input_since": input_since,
                                    "__doc__": f"ONNX {name}."})


ReduceSum = _make("ReduceSum", SUM, 13)
ReduceMean = _make("ReduceMean", MEAN)
ReduceMax = _make("ReduceMax", MAX)
ReduceMin = _make("ReduceMin", MIN)
ReduceProd = _make("ReduceProd", PROD)
ReduceL1 = _make("ReduceL1", L1)
ReduceL2 = _make("ReduceL2", L2)
ReduceLogSum = _make("ReduceLogSum", LOGSUM)
ReduceLogSumExp = _make("ReduceLogSumExp", LOGSUMEXP)
ReduceSumSquare = _make("ReduceSumSquare", SUMSQUARE)

OPS: list[type[OpDef]] = [
    ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
    ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, *INDEX_OPS,
]
