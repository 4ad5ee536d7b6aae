"""Small-tensor kernels for the cpu backend: one numpy call into the output buffer.

On small tensors (a decoder's per-token step: a hidden vector, a few cache rows) a portable
kernel's launch costs tens of microseconds of generated index arithmetic, while numpy does
the op in one whole-array call of a microsecond or two. These kernels cover the ops such
steps are made of (elementwise maths, casts, reductions, argmax, slicing, gathering) when
every output has at most :data:`MAX_ELEMENTS` elements; larger tensors keep the portable
kernels, which fuse neighbouring elementwise nodes into one pass. A case a kernel has no
direct numpy form for (an attribute combination, a value known only at run time) runs the
op's own numpy reference into the buffer, so the results are always the reference's.
GroupQueryAttention runs its reference at every size (batched BLAS products over the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from spawnml.dtypes import DType
from spawnml.registry import find_op

from .fast_kernels import Arrays, Compute, CpuKernel, _known

MAX_ELEMENTS = 1 << 16
_NUMERIC = frozenset({DType.float16, DType.float32, DType.float64, DType.int8, DType.int16,
                      DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32,
                      DType.uint64, DType.bool})
_FLOATS = frozenset({DType.float16, DType.float32, DType.float64})


class SmallKernel(CpuKernel):
    """Base: any attribute, the common numeric dtypes, outputs up to MAX_ELEMENTS; ``fast``
    gives the direct numpy form (None: the op's reference)."""

    since_version = 1  # the reference fallback is the node's own opset's (find_op)
    attributes = None
    dtypes: ClassVar[frozenset[DType] | None] = _NUMERIC
    handles_fused_activation = False

    def accepts(self, node, inputs, outputs) -> bool:
        return all(o.size <= MAX_ELEMENTS for o in outputs)

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        return None

    def build(self, node, inputs, outputs, values) -> Compute:
        found = self.fast(node, inputs, outputs, values)
        return found if found is not None else reference_compute(node, len(outputs))


def reference_compute(node: Any, count: int) -> Compute:
    """The node's numpy reference, written into the ``count`` output buffers."""
    op = find_op(node.domain, node.op_type, node.opset)

    def compute(a: Arrays, out: list[np.ndarray]) -> None:
        results = op.reference(node, a)
        with np.errstate(all="ignore"):
            for i in range(count):
                out[i][...] = results[i]

    return compute


class _Ufunc(SmallKernel):
    """An elementwise numpy ufunc over inputs of the output's dtype (float outputs)."""

    ufunc: ClassVar[np.ufunc]

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        dt = outputs[0].dtype
        if dt not in _FLOATS or any(i is None or i.dtype != dt for i in inputs):
            return None
        ufunc = type(self).ufunc

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            with np.errstate(all="ignore"):
                ufunc(*a, out=out[0])

        return compute


def _variant(base: type[SmallKernel], op_type: str, field: str, fn: Any) -> type[SmallKernel]:
    """``base`` for ``op_type`` with its numpy function ``field`` set to ``fn``."""
    return type(op_type, (base,), {"op_type": op_type, field: staticmethod(fn),
                                   "__doc__": f"{op_type}: np.{fn.__name__}."})


class _Logical(SmallKernel):
    """A boolean numpy ufunc (And, Or, Xor, Not) over bool tensors."""

    since_version = 7  # 1-6: ``broadcast``/``axis`` attributes, not numpy broadcasting
    ufunc: ClassVar[np.ufunc]
    dtypes = frozenset({DType.bool})

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        ufunc = type(self).ufunc
        return lambda a, out: ufunc(*a, out=out[0])


class Cast(SmallKernel):
    """Casts to a float type, or between integer types of the same signedness, as one
    np.copyto; others (saturation, float to int, bool, strings) by the reference."""

    op_type = "Cast"

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        src, dst = inputs[0].dtype, outputs[0].dtype
        ints = {DType.int8, DType.int16, DType.int32, DType.int64}
        if not (dst in _FLOATS and src in _FLOATS | ints) and not (src in ints and dst in ints):
            return None
        if "saturate" in node.attrs or len(inputs) > 1:
            return None
        return lambda a, out: np.copyto(out[0], a[0], casting="unsafe")


def _axes(node: Any, inputs: Any, values: Any) -> tuple[int, ...] | None:
    """A reduction's axes when known at build time (attribute or constant input)."""
    if "axes" in node.attrs:
        return tuple(int(x) for x in node.attrs["axes"])
    if len(inputs) > 1 and inputs[1] is not None:
        known = _known(values, 1)
        return None if known is None else tuple(int(x) for x in np.asarray(known).reshape(-1))
    return ()


class _Reduce(SmallKernel):
    reduce: ClassVar[Callable[..., Any]]

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        axes = _axes(node, inputs, values)
        dt = outputs[0].dtype
        if axes is None or dt not in _FLOATS or inputs[0].dtype != dt:
            return None
        rank = len(inputs[0].shape)
        if not axes:
            if node.attrs.get("noop_with_empty_axes", 0):
                return None
            axes = tuple(range(rank))
        axis = tuple(sorted(a % rank for a in axes))
        keep, reduce = bool(node.attrs.get("keepdims", 1)), type(self).reduce
        shape = outputs[0].shape

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            reduce(a[0], axis=axis, keepdims=keep, out=out[0].reshape(shape))

        return compute


class _ArgExtreme(SmallKernel):
    pick: ClassVar[Callable[..., Any]]

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        if node.attrs.get("select_last_index", 0) or inputs[0].dtype not in _FLOATS:
            return None
        axis = int(node.attrs.get("axis", 0)) % len(inputs[0].shape)
        keep, pick = bool(node.attrs.get("keepdims", 1)), type(self).pick
        return lambda a, out: pick(a[0], axis=axis, keepdims=keep, out=out[0])


def _ints(values: Any, i: int) -> list[int] | None:
    known = _known(values, i)
    return None if known is None else [int(x) for x in np.asarray(known).reshape(-1)]


class Slice(SmallKernel):
    """Opset 10+ Slice with constant starts/ends/axes and positive steps: a numpy basic
    slice (whose clamping of out-of-range bounds is ONNX's for positive steps)."""

    op_type = "Slice"

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        if node.opset and node.opset < 10:
            return None
        rank = len(inputs[0].shape)
        starts, ends = _ints(values, 1), _ints(values, 2)
        axes = _ints(values, 3) if len(inputs) > 3 and inputs[3] is not None else \
            list(range(len(starts or ())))
        steps = _ints(values, 4) if len(inputs) > 4 and inputs[4] is not None else \
            [1] * len(starts or ())
        if starts is None or ends is None or axes is None or steps is None or \
                any(s <= 0 for s in steps):
            return None
        index: list[slice] = [slice(None)] * rank
        for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
            index[axis % rank] = slice(start, end, step)
        where = tuple(index)
        return lambda a, out: np.copyto(out[0], a[0][where])


class Expand(SmallKernel):
    op_type = "Expand"

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        return lambda a, out: np.copyto(out[0], a[0])


class Where(SmallKernel):
    op_type = "Where"
    dtype_inputs = (1, 2)

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            np.copyto(out[0], a[2])
            np.copyto(out[0], a[1], where=a[0])

        return compute


class Gather(SmallKernel):
    """np.take; an index out of range runs the reference, which raises its error."""

    op_type = "Gather"
    dtype_inputs = (0,)

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        axis = int(node.attrs.get("axis", 0)) % max(len(inputs[0].shape), 1)
        fallback = reference_compute(node, 1)

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            try:
                np.take(a[0], a[1], axis=axis, out=out[0], mode="raise")
            except IndexError:
                fallback(a, out)

        return compute


class Equal(SmallKernel):
    op_type = "Equal"
    since_version = 7
    dtype_inputs = (0, 1)

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        return lambda a, out: np.equal(a[0], a[1], out=out[0])


class Pow(SmallKernel):
    """x * x for a constant exponent 2 (a norm's square); other exponents by the reference
    (whose edge values numpy's power does not all share)."""

    op_type = "Pow"
    since_version = 7

    def fast(self, node, inputs, outputs, values) -> Compute | None:
        exponent = _known(values, 1)
        dt = outputs[0].dtype
        if dt not in _FLOATS or inputs[0].dtype != dt or exponent is None or \
                exponent.size != 1 or float(exponent.reshape(-1)[0]) != 2.0:
            return None

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            with np.errstate(all="ignore"):
                np.multiply(a[0], a[0], out=out[0])

        return compute


_VARIANTS: list[tuple[type[SmallKernel], str, Any]] = [
    (_Ufunc, "Sqrt", np.sqrt), (_Ufunc, "Neg", np.negative), (_Ufunc, "Cos", np.cos),
    (_Ufunc, "Sin", np.sin), (_Ufunc, "Exp", np.exp), (_Ufunc, "Reciprocal", np.reciprocal),
    (_Logical, "And", np.logical_and), (_Logical, "Or", np.logical_or),
    (_Logical, "Xor", np.logical_xor), (_Logical, "Not", np.logical_not),
    (_Reduce, "ReduceMean", np.mean), (_Reduce, "ReduceSum", np.sum),
    (_ArgExtreme, "ArgMax", np.argmax), (_ArgExtreme, "ArgMin", np.argmin),
]
_FIELDS = {_Ufunc: "ufunc", _Logical: "ufunc", _Reduce: "reduce", _ArgExtreme: "pick"}


class GroupQueryAttention(CpuKernel):
    """com.microsoft GroupQueryAttention at any size: its numpy reference is two batched
    BLAS products over the whole cache. The portable kernels walk the cache positions one at
    a time, which the numpy target runs as a Python loop (9 ms per decode step and layer on
    tiny_llama:genai's 290-position shared cache)."""

    domain = "com.microsoft"
    op_type = "GroupQueryAttention"
    since_version = 1
    attributes = None
    dtypes = frozenset({DType.float32, DType.float16})
    dtype_inputs = (0, 1, 2, 3, 4)
    handles_fused_activation = False

    def build(self, node, inputs, outputs, values) -> Compute:
        return reference_compute(node, len(outputs))


KERNELS: list[type[CpuKernel]] = [
    *(_variant(base, op, _FIELDS[base], fn) for base, op, fn in _VARIANTS),
    Cast, Slice, Expand, Where, Gather, Equal, Pow, GroupQueryAttention,
]
