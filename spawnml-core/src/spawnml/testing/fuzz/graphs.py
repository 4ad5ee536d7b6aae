"""A structure-aware random graph generator: small valid ONNX graphs (1-6 nodes) with feeds.

Each op generator picks a source tensor from the values built so far (or a new graph input
of a shape that suits it) and random attributes valid for that shape; onnx's strict shape
inference then gives the node's output shapes, and a node it rejects is dropped. Graphs are
float32 mostly, sometimes int64 or float16; feeds sometimes hold NaN/±inf, size-0 dims or
rank-0 values. Ops whose result changes discontinuously with their input (Floor, ArgMax,
comparisons, casts to integers, …) only read values that every implementation computes
bit-exactly (feeds and copies of them), so an ulp of rounding elsewhere cannot flip them.
``generate(seed)`` is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

F32, F16, I64, BOOL = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64), np.dtype(bool)
FLOATS = (F32, F16)
NUMERIC = (F32, F16, I64)
Rng = np.random.Generator


@dataclass
class Value:
    """A tensor of the graph being built: ``exact`` when every implementation computes it
    bit for bit (feeds, copies, max/min of them, integer arithmetic)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    exact: bool

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Generated:
    """A generated case: model bytes, feeds and the op types in node order."""

    model: bytes
    feeds: dict[str, np.ndarray]
    ops: list[str] = field(default_factory=list)
    opset: int = 17


class Reject(Exception):
    """A generator cannot build a valid node from the values at hand."""


class Builder:
    """The graph under construction: nodes, initializers, graph inputs and the value pool."""

    def __init__(self, rng: Rng, opset: int, dtype: np.dtype, nonfinite: bool) -> None:
        self.rng = rng
        self.opset = opset
        self.dtype = dtype
        self.nonfinite = nonfinite
        self.allow_zero = rng.random() < 0.08
        self.max_nodes = 6
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[Value] = []
        self.pool: list[Value] = []
        self._count = 0

    # -- names, constants, inputs ---------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, array: np.ndarray | Sequence | float | int, dtype: np.dtype | None = None,
              prefix: str = "c") -> str:
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
        return name

    def weights(self, shape: Sequence[int], dtype: np.dtype) -> str:
        if dtype == I64:
            return self.const(self.rng.integers(-4, 5, tuple(shape)), I64, "w")
        return self.const(self.rng.standard_normal(tuple(shape)), dtype, "w")

    def random_shape(self, rank: int | None = None, low: int = 1) -> tuple[int, ...]:
        if rank is None:
            rank = int(self.rng.choice([0, 1, 2, 3, 4], p=[0.06, 0.14, 0.3, 0.25, 0.25]))
        dims = [int(self.rng.integers(low, 6)) for _ in range(rank)]
        if self.allow_zero and low == 0 and dims and self.rng.random() < 0.5:
            dims[int(self.rng.integers(rank))] = 0
        return tuple(dims)

    def new_input(self, shape: Sequence[int], dtype: np.dtype | None = None) -> Value:
        value = Value(self.fresh("in"), tuple(shape), dtype or self.dtype, True)
        self.inputs.append(value)
        return value

    def source(self, ok: Callable[[Value], bool], shape: Callable[[], Sequence[int]],
               dtypes: Sequence[np.dtype] = NUMERIC, exact: bool = False) -> Value:
        """A pool value ``ok`` accepts (the newest more often), or a new graph input of
        ``shape()`` in the graph's dtype (float32 where the op does not take that dtype)."""
        fits = [v for v in self.pool if ok(v) and v.dtype in dtypes and (v.exact or not exact)]
        if fits and self.rng.random() < 0.85:
            return fits[-1] if self.rng.random() < 0.6 else fits[int(self.rng.integers(len(fits)))]
        dtype = self.dtype if self.dtype in dtypes else dtypes[0]
        return self.new_input(shape(), dtype)

    # -- nodes -----------------------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[str], n_out: int = 1, exact: bool = False,
            positive: bool = False, **attrs: object) -> list[Value]:
        """Append a node; its outputs' shapes come from onnx's strict shape inference
        (``positive``: reject outputs with a size-0 dim)."""
        outs = [self.fresh(op.lower()[:6]) for _ in range(n_out)]
        node = helper.make_node(op, list(inputs), outs, name=self.fresh("n"), **attrs)
        model = self.model([], extra=[node])
        try:
            inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception as exc:
            raise Reject(f"{op}: {exc}") from exc
        types = {v.name: v.type.tensor_type for v in inferred.graph.value_info}
        values = []
        for name in outs:
            tt = types.get(name)
            if tt is None or not tt.HasField("shape"):
                raise Reject(f"{op}: no shape inferred")
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if any(d < int(positive) for d in dims) or np.prod(dims, dtype=np.int64) > 100_000:
                raise Reject(f"{op}: shape {dims}")
            dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            values.append(Value(name, tuple(dims), np.dtype(dtype), exact))
        self.nodes.append(node)
        self.pool.extend(values)
        return values

    def model(self, outputs: Sequence[Value],
              extra: Sequence[onnx.NodeProto] = ()) -> onnx.ModelProto:
        """The model of the nodes so far (and ``extra``) with ``outputs`` as graph outputs."""
        def info(v: Value) -> onnx.ValueInfoProto:
            return helper.make_tensor_value_info(
                v.name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))

        graph = helper.make_graph(
            [*self.nodes, *extra], "fuzz", [info(v) for v in self.inputs],
            [info(v) for v in outputs], list(self.inits))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        return model


# -- helpers for the generators -------------------------------------------------------------
def _any(b: Builder) -> Callable[[], tuple[int, ...]]:
    return lambda: b.random_shape(low=0)


def _rank_at_least(b: Builder, rank: int, positive: bool = True) -> Callable[[Value], bool]:
    return lambda v: v.rank >= rank and (not positive or all(d > 0 for d in v.shape))


def _axis(b: Builder, rank: int) -> int:
    axis = int(b.rng.integers(rank))
    return axis - rank if b.rng.random() < 0.3 else axis


def _pick(b: Builder, seq: Sequence[Any]) -> Any:
    return seq[int(b.rng.integers(len(seq)))]


def _axes_operand(b: Builder, op_since_18: bool, axes: list[int]) -> tuple[list[str], dict]:
    """Reduce-style axes: an int64 input from the opset where the op takes one, else an
    attribute."""
    if op_since_18:
        return ([b.const(axes, I64, "axes")] if axes else []), {}
    return [], ({"axes": axes} if axes else {})


# -- op generators ----------------------------------------------------------------------------
_UNARY = {
    "Relu": True, "Abs": True, "Neg": True, "Sigmoid": False, "Tanh": False, "Exp": False,
    "Log": False, "Sqrt": False, "Erf": False, "Reciprocal": False, "Softplus": False,
    "Sin": False, "Cos": False, "Atan": False, "Softsign": False, "Selu": False, "Elu": False,
    "LeakyRelu": False, "HardSigmoid": False, "HardSwish": False,
}
_STEP = ("Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf")


def gen_unary(b: Builder) -> None:
    """An elementwise float op (exact ones keep exactness) or a step function on exact input."""
    if b.rng.random() < 0.25:
        op = _pick(b, _STEP)
        src = b.source(lambda v: True, _any(b), (F32,) if op == "IsInf" else FLOATS, exact=True)
        b.add(op, [src.name], exact=True)
        return
    op = _pick(b, sorted(_UNARY))
    attrs: dict[str, object] = {}
    if op in ("LeakyRelu", "Elu"):
        attrs["alpha"] = float(_pick(b, (0.01, 0.2, 1.0, 2.5)))
    src = b.source(lambda v: True, _any(b), FLOATS)
    b.add(op, [src.name], exact=_UNARY[op] and src.exact, **attrs)


def gen_int_unary(b: Builder) -> None:
    """Abs, Neg or Sign of an int64 value."""
    src = b.source(lambda v: True, _any(b), (I64,))
    b.add(_pick(b, ("Abs", "Neg", "Sign")), [src.name], exact=True)


def gen_clip(b: Builder) -> None:
    """Clip with optional scalar min/max inputs."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    lo, hi = sorted(b.rng.integers(-3, 4, 2).tolist())
    ins = [src.name, b.const(lo, src.dtype) if b.rng.random() < 0.7 else ""]
    if b.rng.random() < 0.7:
        ins.append(b.const(hi, src.dtype))
    b.add("Clip", ins, exact=src.exact)


def _broadcastable(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: a suffix with some dims set to 1."""
    keep = int(b.rng.integers(len(shape) + 1))
    dims = [d if b.rng.random() < 0.6 else 1 for d in shape[len(shape) - keep:]]
    if b.rng.random() < 0.15 and dims:
        return tuple([*([1] * int(b.rng.integers(1, 3))), *dims])  # a higher-rank operand
    return tuple(dims)


def gen_binary(b: Builder) -> None:
    """Add/Sub/Mul/Div/Pow/Max/Min with a broadcast constant, itself or a same-shape value."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    ints = src.dtype == I64
    op = _pick(b, ("Add", "Sub", "Mul", "Div", "Max", "Min") if ints
               else ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"))
    choice = b.rng.random()
    same = [v for v in b.pool if v.shape == src.shape and v.dtype == src.dtype and v is not src]
    if op == "Div" and ints:  # no integer division by zero: onnxruntime raises SIGFPE
        shape = _broadcastable(b, src.shape)
        other = Value(b.const(_pick(b, (-3, -1, 2, 5)) * np.ones(shape, np.int64), I64), shape,
                      I64, True)
    elif op == "Pow":
        shape = _broadcastable(b, src.shape)
        exps = np.asarray(b.rng.choice([2.0, 3.0, 0.5, -1.0, 1.7], shape))
        other = Value(b.const(exps, src.dtype), shape, src.dtype, True)
    elif choice < 0.2:
        other = src
    elif choice < 0.4 and same:
        other = _pick(b, same)
    else:
        shape = _broadcastable(b, src.shape)
        other = Value(b.weights(shape, src.dtype), shape, src.dtype, True)
    names = [src.name, other.name]
    if b.rng.random() < 0.3 and not (op == "Div" and ints):
        names.reverse()
    exact = src.exact and other.exact and (op in ("Max", "Min") or (ints and op != "Div"))
    b.add(op, names, exact=exact)


def gen_compare(b: Builder) -> None:
    """A comparison of an exact value with a constant, then Where, Cast or Not."""
    src = b.source(lambda v: True, _any(b), NUMERIC, exact=True)
    op = _pick(b, ("Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual"))
    threshold = b.const(0 if src.dtype == I64 else 0.25, src.dtype)
    (cond,) = b.add(op, [src.name, threshold], exact=True)
    follow = b.rng.random()
    if len(b.nodes) >= b.max_nodes:
        return
    if follow < 0.5:
        other = b.weights(_broadcastable(b, src.shape), src.dtype)
        b.add("Where", [cond.name, src.name, other], exact=False)
    elif follow < 0.8:
        b.add("Cast", [cond.name], exact=True, to=helper.np_dtype_to_tensor_dtype(b.dtype))
    else:
        b.add("Not", [cond.name], exact=True)


def gen_matmul(b: Builder) -> None:
    """MatMul with a [K, N] (or batched) weight."""
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4))),
                   (F32, F16, I64))
    k, n = src.shape[-1], int(b.rng.integers(1, 6))
    shape = (k, n) if src.rank == 1 or b.rng.random() < 0.7 else (*src.shape[:-2], k, n)
    b.add("MatMul", [src.name, b.weights(shape, src.dtype)])


def gen_gemm(b: Builder) -> None:
    """Gemm with transA/transB, alpha/beta and an optional broadcast C."""
    src = b.source(lambda v: v.rank == 2, lambda: b.random_shape(2), FLOATS)
    trans_a, trans_b = int(b.rng.integers(2)), int(b.rng.integers(2))
    m, k = src.shape[::-1] if trans_a else src.shape
    n = int(b.rng.integers(1, 6))
    ins = [src.name, b.weights((n, k) if trans_b else (k, n), src.dtype)]
    c = b.rng.random()
    if c < 0.7:
        ins.append(b.weights(_pick(b, ((n,), (m, n), (1,), (m, 1), ())), src.dtype))
    b.add("Gemm", ins, transA=trans_a, transB=trans_b, alpha=float(_pick(b, (1.0, 0.5, -2.0))),
          beta=float(_pick(b, (1.0, 0.0, 1.5))))


def gen_conv(b: Builder) -> None:
    """A 1-D or 2-D Conv with random kernel, strides, dilations, pads/auto_pad, group, bias."""
    src = b.source(lambda v: v.rank in (3, 4) and all(d > 0 for d in v.shape),
                   lambda: (1, int(b.rng.integers(1, 5)),
                            *b.rng.integers(3, 9, int(b.rng.integers(1, 3))).tolist()), FLOATS)
    c, spatial = src.shape[1], src.shape[2:]
    group = _pick(b, [g for g in range(1, c + 1) if c % g == 0])
    m = group * int(b.rng.integers(1, 3))
    kernel = [int(b.rng.integers(1, min(d, 3) + 1)) for d in spatial]
    attrs: dict[str, object] = {"kernel_shape": kernel, "group": group}
    if b.rng.random() < 0.4:
        attrs["strides"] = [int(b.rng.integers(1, 3)) for _ in spatial]
    if b.rng.random() < 0.2:
        attrs["auto_pad"] = _pick(b, ("SAME_UPPER", "SAME_LOWER", "VALID"))
    elif b.rng.random() < 0.6:
        attrs["pads"] = [int(b.rng.integers(0, 3)) for _ in range(2 * len(spatial))]
    if b.rng.random() < 0.3 and "SAME" not in str(attrs.get("auto_pad")):  # ort: unsupported
        attrs["dilations"] = [int(b.rng.integers(1, 3)) for _ in spatial]
    dil = attrs.get("dilations", [1] * len(spatial))
    pads = attrs.get("pads", [0] * 2 * len(spatial))
    for i, d in enumerate(spatial):  # onnx's inference misses a dilated kernel that is too big
        if "SAME" not in str(attrs.get("auto_pad")) and (kernel[i] - 1) * dil[i] + 1 > (
                d + pads[i] + pads[i + len(spatial)]):
            raise Reject("the dilated kernel is larger than the padded input")
    ins = [src.name, b.weights((m, c // group, *kernel), src.dtype)]
    if b.rng.random() < 0.5:
        ins.append(b.weights((m,), src.dtype))
    b.add("Conv", ins, positive=True, **attrs)


def gen_pool(b: Builder) -> None:
    """MaxPool/AveragePool (pads smaller than the kernel, ceil_mode sometimes) or a global pool."""
    src = b.source(lambda v: v.rank in (3, 4) and all(d > 0 for d in v.shape),
                   lambda: (1, int(b.rng.integers(1, 4)),
                            *b.rng.integers(2, 8, int(b.rng.integers(1, 3))).tolist()), FLOATS)
    if b.rng.random() < 0.25:
        op = _pick(b, ("GlobalAveragePool", "GlobalMaxPool"))
        b.add(op, [src.name], exact=op == "GlobalMaxPool" and src.exact)
        return
    spatial = src.shape[2:]
    op = _pick(b, ("MaxPool", "AveragePool"))
    kernel = [int(b.rng.integers(1, min(d, 3) + 1)) for d in spatial]
    attrs: dict[str, object] = {"kernel_shape": kernel}
    if b.rng.random() < 0.5:
        attrs["strides"] = [int(b.rng.integers(1, 3)) for _ in spatial]
    if b.rng.random() < 0.5:
        attrs["pads"] = [int(b.rng.integers(0, k)) for k in kernel * 2]
    if b.rng.random() < 0.2:
        attrs["ceil_mode"] = 1
    if op == "AveragePool" and b.rng.random() < 0.3:
        attrs["count_include_pad"] = 1
    b.add(op, [src.name], exact=op == "MaxPool" and src.exact, positive=True, **attrs)


def gen_softmax(b: Builder) -> None:
    """Softmax/LogSoftmax along a random axis, or Hardmax of an exact value."""
    hard = b.rng.random() < 0.15 and not b.nonfinite
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4))),
                   FLOATS, exact=hard)
    op = "Hardmax" if hard else _pick(b, ("Softmax", "LogSoftmax"))
    b.add(op, [src.name], exact=hard, axis=_axis(b, src.rank))


_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")


def gen_reduce(b: Builder) -> None:
    """A Reduce* over random axes (attribute or input by opset), keepdims, noop_with_empty_axes."""
    op = _pick(b, _REDUCE)
    ints_ok = op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd")
    src = b.source(lambda v: True, _any(b), NUMERIC if ints_ok else FLOATS)
    if op in ("ReduceMax", "ReduceMin") and any(d == 0 for d in src.shape):
        raise Reject("max/min of an empty set")
    axes = sorted({_axis(b, src.rank) % src.rank for _ in range(int(b.rng.integers(0, 3)))}
                  ) if src.rank else []
    axes = [a - src.rank if b.rng.random() < 0.3 else a for a in axes]
    ins, attrs = _axes_operand(b, b.opset >= 18 or op == "ReduceSum", axes)
    attrs["keepdims"] = int(b.rng.integers(2))
    if not axes and (b.opset >= 18 or op == "ReduceSum") and b.rng.random() < 0.3:
        attrs["noop_with_empty_axes"] = 1
    exact = src.exact and (op in ("ReduceMax", "ReduceMin") or src.dtype == I64)
    b.add(op, [src.name, *ins], exact=exact, **attrs)


def gen_argmax(b: Builder) -> None:
    """ArgMax/ArgMin of an exact, finite value (ties settled by select_last_index)."""
    if b.nonfinite:
        raise Reject("NaN order is unspecified")
    src = b.source(_rank_at_least(b, 1), lambda: b.random_shape(int(b.rng.integers(1, 4))),
                   NUMERIC, exact=True)
    b.add(_pick(b, ("ArgMax", "ArgMin")), [src.name], exact=True, axis=_axis(b, src.rank),
          keepdims=int(b.rng.integers(2)), select_last_index=int(b.rng.integers(2)))


def gen_topk(b: Builder) -> None:
    """Sorted TopK of an exact, finite value; both outputs join the pool."""
    if b.nonfinite:
        raise Reject("NaN order is unspecified")
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4)), 0),
                   NUMERIC, exact=True)
    axis = _axis(b, src.rank)
    k = int(b.rng.integers(0, src.shape[axis] + 1))
    b.add("TopK", [src.name, b.const([k], I64, "k")], n_out=2, exact=True, axis=axis,
          largest=int(b.rng.integers(2)), sorted=1)


def gen_cumsum(b: Builder) -> None:
    """CumSum along a scalar axis input, exclusive and/or reverse."""
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4)), 0),
                   (F32, I64))
    axis = b.const(_axis(b, src.rank), I64, "axis")
    b.add("CumSum", [src.name, axis], exact=src.exact and src.dtype == I64,
          exclusive=int(b.rng.integers(2)), reverse=int(b.rng.integers(2)))


def gen_reshape(b: Builder) -> None:
    """Reshape to a random factorisation of the size, with a -1 or a 0 (copy) dim; an empty
    value to literal dims with allowzero=1."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    size = int(np.prod(src.shape, dtype=np.int64))
    if size == 0:
        if b.opset < 14:
            raise Reject("an empty Reshape needs allowzero (opset 14)")
        dims = [int(d) for d in b.rng.permutation(np.asarray(src.shape, np.int64))]
        if b.rng.random() < 0.5:
            dims = [*dims, 1] if b.rng.random() < 0.5 else [0]
        b.add("Reshape", [src.name, b.const(dims, I64, "shape")], exact=src.exact, allowzero=1)
        return
    dims: list[int] = []
    rest = size
    for _ in range(int(b.rng.integers(0, 4))):
        dims.append(_pick(b, [d for d in range(1, rest + 1) if rest % d == 0]))
        rest //= dims[-1]
    dims.append(rest)
    if b.rng.random() < 0.5:
        dims[int(b.rng.integers(len(dims)))] = -1
    elif src.rank and len(dims) >= 1 and dims[0] == src.shape[0] and b.rng.random() < 0.5:
        dims[0] = 0
    b.add("Reshape", [src.name, b.const(dims, I64, "shape")], exact=src.exact)


def gen_transpose(b: Builder) -> None:
    """Transpose by a random permutation (or the default reversal)."""
    src = b.source(lambda v: v.rank >= 2, lambda: b.random_shape(int(b.rng.integers(2, 5)), 0),
                   NUMERIC)
    attrs = {} if b.rng.random() < 0.2 else {"perm": b.rng.permutation(src.rank).tolist()}
    b.add("Transpose", [src.name], exact=src.exact, **attrs)


def gen_flatten_squeeze(b: Builder) -> None:
    """Flatten at an axis, Unsqueeze new axes, or Squeeze size-1 dims."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    choice = b.rng.random()
    if choice < 0.35 and src.rank:
        b.add("Flatten", [src.name], exact=src.exact,
              axis=int(b.rng.integers(-src.rank, src.rank + 1)))
    elif choice < 0.7 or 1 not in src.shape:
        out_rank = src.rank + int(b.rng.integers(1, 3))
        axes = sorted(b.rng.choice(out_rank, out_rank - src.rank, replace=False).tolist())
        b.add("Unsqueeze", [src.name, b.const(axes, I64, "axes")], exact=src.exact)
    else:
        ones = [i for i, d in enumerate(src.shape) if d == 1]
        axes = ones if b.rng.random() < 0.5 else [_pick(b, ones)]
        b.add("Squeeze", [src.name, b.const(axes, I64, "axes")], exact=src.exact)


def gen_slice(b: Builder) -> None:
    """Slice with negative, out-of-range (clamped) starts/ends and steps of ±1/±2."""
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4)), 0),
                   NUMERIC)
    axes = sorted(b.rng.choice(src.rank, int(b.rng.integers(1, src.rank + 1)), replace=False))
    starts, ends, steps = [], [], []
    for a in axes:
        d = src.shape[a]
        step = int(_pick(b, (1, 1, 2, -1, -2)))
        lo, hi = int(b.rng.integers(-d - 2, d + 3)), int(b.rng.integers(-d - 2, d + 3))
        if b.rng.random() < 0.15:
            hi = int(_pick(b, (2**62, -(2**62), 2**31)))
        starts.append(lo)
        ends.append(hi)
        steps.append(step)
    ins = [src.name, b.const(starts, I64, "st"), b.const(ends, I64, "en")]
    if b.rng.random() < 0.8:
        ins += [b.const([int(a) - src.rank if b.rng.random() < 0.3 else int(a) for a in axes],
                        I64, "ax"), b.const(steps, I64, "sp")]
    elif len(axes) == src.rank and all(s == 1 for s in steps):
        ins = ins[:3]
    else:
        ins += [b.const([int(a) for a in axes], I64, "ax"), b.const(steps, I64, "sp")]
    b.add("Slice", ins, exact=src.exact)


def gen_gather(b: Builder) -> None:
    """Gather with constant indices (negative too) of rank 0-2 along a random axis."""
    src = b.source(lambda v: v.rank >= 1 and all(d > 0 for d in v.shape),
                   lambda: b.random_shape(int(b.rng.integers(1, 4))), NUMERIC)
    axis = _axis(b, src.rank)
    d = src.shape[axis]
    shape = b.random_shape(int(b.rng.integers(0, 3)))
    idx = b.rng.integers(-d, d, shape)
    b.add("Gather", [src.name, b.const(idx, I64, "idx")], exact=src.exact, axis=axis)


def gen_concat(b: Builder) -> None:
    """Concat with a constant, itself or another value along a random axis."""
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4)), 0),
                   NUMERIC)
    axis = _axis(b, src.rank)
    other_shape = list(src.shape)
    other_shape[axis] = int(b.rng.integers(0 if b.allow_zero else 1, 4))
    names = [src.name]
    for _ in range(int(b.rng.integers(1, 3))):
        if b.rng.random() < 0.3:
            names.append(src.name)
        else:
            names.append(b.weights(other_shape, src.dtype))
    b.add("Concat", names, exact=src.exact, axis=axis)


def gen_pad(b: Builder) -> None:
    """Pad: constant (with a value, negative pads crop), edge or reflect (pads below the dim)."""
    src = b.source(lambda v: v.rank >= 1 and all(d > 0 for d in v.shape),
                   lambda: b.random_shape(int(b.rng.integers(1, 5))), NUMERIC)
    mode = _pick(b, ("constant", "constant", "edge", "reflect"))
    pads = []
    for _ in range(2):
        for d in src.shape:
            if mode == "reflect":
                pads.append(int(b.rng.integers(0, d)))
            elif mode == "constant" and b.rng.random() < 0.15:
                pads.append(-int(b.rng.integers(0, (d + 1) // 2)))
            else:
                pads.append(int(b.rng.integers(0, 3)))
    ins = [src.name, b.const(pads, I64, "pads")]
    if mode == "constant" and b.rng.random() < 0.5:
        ins.append(b.const(1.5 if src.dtype != I64 else 7, src.dtype))
    b.add("Pad", ins, exact=src.exact, mode=mode)


def gen_expand(b: Builder) -> None:
    """Expand size-1 dims and add leading dims (a target dim of 1 keeps the source dim)."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    target = [int(b.rng.integers(1, 4)) if d == 1 else (d if b.rng.random() < 0.8 else 1)
              for d in src.shape]
    target = [int(b.rng.integers(1, 3)) for _ in range(int(b.rng.integers(0, 2)))] + target
    b.add("Expand", [src.name, b.const(target, I64, "shape")], exact=src.exact)


def gen_tile_split(b: Builder) -> None:
    """Tile by 1-3 per dim, or Split along an axis into two parts."""
    src = b.source(lambda v: v.rank >= 1, lambda: b.random_shape(int(b.rng.integers(1, 4))),
                   NUMERIC)
    if b.rng.random() < 0.5:
        reps = b.rng.integers(1, 4, src.rank).tolist()
        b.add("Tile", [src.name, b.const(reps, I64, "reps")], exact=src.exact)
        return
    axis = _axis(b, src.rank)
    d = src.shape[axis]
    first = int(b.rng.integers(0, d + 1))
    b.add("Split", [src.name, b.const([first, d - first], I64, "split")], n_out=2,
          exact=src.exact, axis=axis)


def gen_resize(b: Builder) -> None:
    """Resize of the spatial dims of a 4-D value: nearest/linear/cubic, a coordinate mode,
    scales or sizes."""
    src = b.source(lambda v: v.rank == 4 and all(d > 0 for d in v.shape),
                   lambda: (1, int(b.rng.integers(1, 3)), *b.rng.integers(1, 7, 2).tolist()),
                   FLOATS)
    mode = _pick(b, ("nearest", "linear", "cubic"))
    attrs: dict[str, object] = {"mode": mode, "coordinate_transformation_mode": _pick(
        b, ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"))}
    if mode == "nearest":
        attrs["nearest_mode"] = _pick(b, ("round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(_pick(b, (-0.75, -0.5)))
        attrs["exclude_outside"] = int(b.rng.integers(2))
    if b.rng.random() < 0.5:
        scales = [1.0, 1.0, *b.rng.choice([0.5, 0.75, 1.0, 1.5, 2.0, 3.0], 2).tolist()]
        ins = [src.name, "", b.const(scales, F32, "scales")]
    else:
        sizes = [*src.shape[:2], *b.rng.integers(1, 9, 2).tolist()]
        ins = [src.name, "", "", b.const(sizes, I64, "sizes")]
    b.add("Resize", ins, exact=mode == "nearest" and src.exact, **attrs)


def gen_norm(b: Builder) -> None:
    """LayerNormalization (opset 17+), BatchNormalization (inference) or
    InstanceNormalization."""
    kind = _pick(b, ("layer", "batch", "instance") if b.opset >= 17 else ("batch", "instance"))
    if kind == "layer":
        src = b.source(_rank_at_least(b, 1), lambda: b.random_shape(int(b.rng.integers(1, 4))),
                       FLOATS)
        axis = _axis(b, src.rank)
        shape = src.shape[axis:]
        ins = [src.name, b.weights(shape, src.dtype)]
        if b.rng.random() < 0.7:
            ins.append(b.weights(shape, src.dtype))
        b.add("LayerNormalization", ins, axis=axis, epsilon=float(_pick(b, (1e-5, 1e-3))))
        return
    rank = 2 if kind == "batch" else 3
    src = b.source(_rank_at_least(b, rank), lambda: b.random_shape(int(b.rng.integers(rank, 5))),
                   FLOATS)
    c = src.shape[1]
    if kind == "instance":
        b.add("InstanceNormalization", [src.name, b.weights((c,), src.dtype),
                                        b.weights((c,), src.dtype)], epsilon=1e-5)
        return
    var = b.const(b.rng.uniform(0.5, 2.0, c), src.dtype, "var")
    b.add("BatchNormalization", [src.name, b.weights((c,), src.dtype), b.weights((c,), src.dtype),
                                 b.weights((c,), src.dtype), var], epsilon=1e-5)


def gen_cast(b: Builder) -> None:
    """Cast between float32, float16 and int64 (float to int only for exact, finite values)."""
    src = b.source(lambda v: True, _any(b), NUMERIC)
    targets = [F32, F16] + ([I64] if src.exact and not b.nonfinite else [])
    to = _pick(b, [t for t in targets if t != src.dtype] or [F32])
    b.add("Cast", [src.name], exact=src.exact, to=helper.np_dtype_to_tensor_dtype(to))


GENERATORS: dict[str, Callable[[Builder], None]] = {
    "unary": gen_unary, "int_unary": gen_int_unary, "clip": gen_clip, "binary": gen_binary,
    "compare": gen_compare, "matmul": gen_matmul, "gemm": gen_gemm, "conv": gen_conv,
    "pool": gen_pool, "softmax": gen_softmax, "reduce": gen_reduce, "argmax": gen_argmax,
    "topk": gen_topk, "cumsum": gen_cumsum, "reshape": gen_reshape, "transpose": gen_transpose,
    "flatten_squeeze": gen_flatten_squeeze, "slice": gen_slice, "gather": gen_gather,
    "concat": gen_concat, "pad": gen_pad, "expand": gen_expand, "tile_split": gen_tile_split,
    "resize": gen_resize, "norm": gen_norm, "cast": gen_cast,
}


# -- feeds and the whole graph -----------------------------------------------------------------
def make_feed(rng: Rng, shape: Sequence[int], dtype: np.dtype, nonfinite: bool) -> np.ndarray:
    """Random values for one input: normal floats (sometimes large or tiny, sometimes with
    NaN/±inf), small integers."""
    if dtype == I64:
        return np.asarray(rng.integers(-10, 11, tuple(shape)), np.int64)
    if dtype == BOOL:
        return np.asarray(rng.random(tuple(shape)) < 0.5)
    scale = float(rng.choice([1.0, 1.0, 1.0, 10.0, 0.01]))
    values = np.asarray(rng.standard_normal(tuple(shape)) * scale)
    if nonfinite and values.size:
        mask = rng.random(values.shape) < 0.15
        values[mask] = rng.choice([np.nan, np.inf, -np.inf], int(mask.sum()))
    return np.asarray(values, dtype)


def _graph_dtype(rng: Rng) -> np.dtype:
    return (F32, I64, F16)[int(rng.choice(3, p=[0.85, 0.1, 0.05]))]


def generate(seed: int) -> Generated:
    """A random valid graph of 1-6 nodes with feeds for its inputs, the same for one ``seed``."""
    rng = np.random.default_rng(seed)
    opset = int(rng.choice([13, 17, 18], p=[0.2, 0.5, 0.3]))
    b = Builder(rng, opset, _graph_dtype(rng), nonfinite=bool(rng.random() < 0.12))
    names = sorted(GENERATORS)
    wanted = b.max_nodes = int(rng.integers(1, 7))
    for _ in range(wanted * 8):
        if len(b.nodes) >= wanted:
            break
        mark = (len(b.nodes), len(b.inits), len(b.inputs), len(b.pool))
        try:
            GENERATORS[names[int(rng.integers(len(names)))]](b)
        except Reject:
            b.nodes, b.inits = b.nodes[: mark[0]], b.inits[: mark[1]]
            b.inputs, b.pool = b.inputs[: mark[2]], b.pool[: mark[3]]
    if not b.nodes:  # every try was rejected: one Relu on a new input
        b.add("Relu", [b.new_input(b.random_shape(), F32).name], exact=True)
    outputs = [b.pool[-1]]
    extra = [v for v in b.pool[:-1] if rng.random() < 0.25]
    outputs += extra[:2]
    feeds = {v.name: make_feed(rng, v.shape, v.dtype, b.nonfinite) for v in b.inputs}
    model = b.model(outputs)
    return Generated(model.SerializeToString(deterministic=True), feeds,
                     [n.op_type for n in b.nodes], opset)
