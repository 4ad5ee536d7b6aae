"""BLAS/numpy kernels for the heavy float32 ops on the cpu backend.

They are tried before the portable lowering (``spawnml_register_kernels``); every other
dtype, attribute combination or dynamic shape goes to the portable kernels, which stay the
reference path (``SPAWNML_CPU_FAST_KERNELS=0`` turns these off). A cpu DeviceTensor's
buffer handle is a numpy ``uint8`` array: kernels read typed views of it and write outputs
in place, so nothing is copied on the way in or out.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from spawnml.dtypes import DType
from spawnml.graph.fusion import fused_activation
from spawnml.op import BackendKernel, Node, TensorInfo, kernel_attributes
from spawnml.tensor import DeviceTensor

from . import fast_conv, fast_pool, fast_window
from .blas_threads import with_blas_threads

ENV = "SPAWNML_CPU_FAST_KERNELS"

Arrays = list[np.ndarray | None]
Compute = Callable[[Arrays, list[np.ndarray]], None]


def enabled() -> bool:
    """False when ``SPAWNML_CPU_FAST_KERNELS`` is 0/off/false (portable kernels only)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def host_view(tensor: DeviceTensor) -> np.ndarray:
    """A typed, shaped numpy view of a cpu tensor's buffer (no copy)."""
    dt = tensor.backend.storage_dtype(tensor.dtype).numpy
    raw: np.ndarray = tensor.buffer.handle
    return raw[: tensor.size * dt.itemsize].view(dt).reshape(tensor.shape)


_ZERO, _INF = np.float32(0), np.float32(np.inf)


def relu_into(x: np.ndarray, y: np.ndarray) -> None:
    """y = max(x, 0) (NaN stays NaN). np.clip, because numpy 2.4's maximum against a scalar
    takes a non-SIMD loop: 0.45 ms vs 0.14 ms for 1.2M float32 on this machine."""
    np.clip(x, _ZERO, _INF, out=y)


def activation_finish(node: Node) -> fast_window.Finish:
    """``finish(out, result)``: ``out`` = the activation fused into ``node`` (graph.fusion)
    applied to ``result`` (which may be ``out``); np.copyto when none is fused."""
    found = fused_activation(node)
    if found is None:
        return np.copyto
    op, act, constants = found
    if act.op_type == "Relu":
        return lambda out, r: relu_into(r, out)
    if act.op_type == "Clip":
        lo, hi = (np.float32(v) for v in op.bounds(act, constants))  # type: ignore[attr-defined]
        return lambda out, r: np.clip(r, lo, hi, out=out)
    if act.op_type == "LeakyRelu":
        alpha = np.float32(act.attrs.get("alpha", 0.01))
        return lambda out, r: np.copyto(out, np.where(r < 0, r * alpha, r))

    if act.op_type == "Sigmoid":
        return _sigmoid_into

    def generic(out: np.ndarray, r: np.ndarray) -> None:  # the activation's numpy reference
        with np.errstate(all="ignore"):
            out[...] = op.reference(act, [r, *constants])[0]

    return generic


def _sigmoid_into(out: np.ndarray, r: np.ndarray) -> None:
    if r is not out:
        np.copyto(out, r)
    _sigmoid_inplace(out)


def _sigmoid_inplace(y: np.ndarray) -> None:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for x < -88: 1/inf = 0
        np.negative(y, out=y)
        np.exp(y, out=y)
        y += 1.0
        np.reciprocal(y, out=y)


class CpuKernel(BackendKernel):
    """Base: float32, static shapes; subclasses implement ``build`` over numpy arrays and
    declare their domain (BackendKernel: opsets, attributes; ``dtype_inputs``)."""

    backend = "cpu"
    dtypes: ClassVar[frozenset[DType]] = frozenset({DType.float32})
    attributes: ClassVar[Mapping[str, Any] | None] = kernel_attributes()  # none unless declared
    handles_fused_activation: ClassVar[bool] = True
    """``prepare`` applies an activation fused into the node by graph.fusion (FUSED_ATTR)..."""
    applies_activation: ClassVar[bool] = False
    """...unless ``build`` applies it itself (see activation_finish)."""

    def supports(
        self, node: Node, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo]
    ) -> bool:
        if not enabled() or self.outside_domain(node, inputs, outputs) is not None:
            return False
        if not all(i.is_static for i in [*inputs, *outputs] if i is not None):
            return False
        if not any(o.size for o in outputs):  # nothing to compute: the portable lowering's
            return False  # empty launch list (numpy's reductions refuse zero-size arrays)
        return self.accepts(node, inputs, outputs)

    def accepts(
        self, node: Node, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo]
    ) -> bool:
        """Op-specific attribute checks."""
        return True

    def build(
        self,
        node: Node,
        inputs: Sequence[TensorInfo | None],
        outputs: Sequence[TensorInfo],
        values: Sequence[np.ndarray | None],
    ) -> Compute:
        raise NotImplementedError

    def prepare(
        self,
        backend: Any,
        node: Node,
        inputs: Sequence[TensorInfo | None],
        outputs: Sequence[TensorInfo],
        values: Sequence[np.ndarray | None],
    ) -> Callable[[Sequence[DeviceTensor | None], Sequence[DeviceTensor]], None]:
        compute = with_blas_threads(self.build(node, inputs, outputs, values), backend.threads)
        finish = activation_finish(node)
        activation = None if self.applies_activation or finish is np.copyto else finish

        def run(ins: Sequence[DeviceTensor | None], outs: Sequence[DeviceTensor]) -> None:
            arrays = [None if t is None else host_view(t) for t in ins]
            results = [host_view(t) for t in outs]
            compute(arrays, results)
            if activation is not None:
                activation(results[0], results[0])

        def bind(ins: Sequence[DeviceTensor | None], outs: Sequence[DeviceTensor]) -> Any:
            """``run`` for fixed tensors (recorded plans): the views are made once."""
            arrays = [None if t is None else host_view(t) for t in ins]
            results = [host_view(t) for t in outs]
            if activation is None:
                return functools.partial(compute, arrays, results)
            out = results[0]

            def bound() -> None:
                compute(arrays, results)
                activation(out, out)

            return bound

        run.bind = bind  # type: ignore[attr-defined]
        return run


def _known(values: Sequence[np.ndarray | None], i: int) -> np.ndarray | None:
    return values[i] if i < len(values) else None


class Conv(CpuKernel):
    op_type = "Conv"
    since_version = 1  # one epoch (Conv 11 only documents auto_pad)
    attributes = kernel_attributes("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                   "strides")
    applies_activation = True

    def accepts(self, node, inputs, outputs) -> bool:
        return inputs[0] is not None and len(inputs[0].shape or ()) >= 3

    def build(self, node, inputs, outputs, values) -> Compute:
        x, w = inputs[0], inputs[1]
        win = fast_window.window(
            x.shape[2:],
            node.attrs.get("kernel_shape") or w.shape[2:],
            strides=node.attrs.get("strides"),
            dilations=node.attrs.get("dilations"),
            pads=node.attrs.get("pads"),
            auto_pad=_auto_pad(node),
        )
        group = int(node.attrs.get("group", 1))
        finish = activation_finish(node)
        has_bias = len(inputs) > 2 and inputs[2] is not None
        weights, bias = _known(values, 1), _known(values, 2)
        if weights is not None and (bias is not None or not has_bias):
            plan = fast_conv.ConvPlan(weights, bias, win, group, finish)  # weights: once
            return lambda a, out: plan(a[0], out[0])

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            b = a[2] if has_bias else None
            fast_conv.ConvPlan(a[1], b, win, group, finish)(a[0], out[0])

        return compute


def _auto_pad(node: Node) -> str:
    value = node.attrs.get("auto_pad", "NOTSET")
    return value.decode() if isinstance(value, bytes) else str(value)


class _Pool(CpuKernel):
    since_version = 1  # later epochs add ceil_mode/dilations/count_include_pad, all handled
    POOL = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")

    def accepts(self, node, inputs, outputs) -> bool:
        single = len([o for o in node.outputs if o]) == 1  # no MaxPool Indices
        return single and len(inputs[0].shape or ()) >= 3

    def geometry(self, node: Node, x: TensorInfo) -> fast_window.Window:
        return fast_window.window(
            x.shape[2:],
            node.attrs["kernel_shape"],
            strides=node.attrs.get("strides"),
            dilations=node.attrs.get("dilations"),
            pads=node.attrs.get("pads"),
            auto_pad=_auto_pad(node),
            ceil_mode=bool(node.attrs.get("ceil_mode", 0)),
        )


class MaxPool(_Pool):
    op_type = "MaxPool"
    attributes = kernel_attributes(*_Pool.POOL, "storage_order")  # only affects Indices (refused)

    def build(self, node, inputs, outputs, values) -> Compute:
        win = self.geometry(node, inputs[0])
        return lambda a, out: fast_pool.max_pool(a[0], win, out[0])


class AveragePool(_Pool):
    op_type = "AveragePool"
    attributes = kernel_attributes(*_Pool.POOL, "count_include_pad")

    def build(self, node, inputs, outputs, values) -> Compute:
        win = self.geometry(node, inputs[0])
        include = bool(node.attrs.get("count_include_pad", 0))
        counts = fast_pool.pool_counts(inputs[0].shape[2:], win, include)
        return lambda a, out: fast_pool.avg_pool(a[0], win, counts, out[0])


class GlobalAveragePool(CpuKernel):
    op_type = "GlobalAveragePool"
    since_version = 1

    def build(self, node, inputs, outputs, values) -> Compute:
        axes = tuple(range(2, len(inputs[0].shape)))
        return lambda a, out: np.mean(a[0], axis=axes, keepdims=True, out=out[0])


class GlobalMaxPool(CpuKernel):
    """NaN skipped unless all are (fmax), as the op's reference and onnxruntime."""

    op_type = "GlobalMaxPool"
    since_version = 1

    def build(self, node, inputs, outputs, values) -> Compute:
        axes = tuple(range(2, len(inputs[0].shape)))
        return lambda a, out: np.fmax.reduce(a[0], axis=axes, keepdims=True, out=out[0])


class Gemm(CpuKernel):
    op_type = "Gemm"
    since_version = 7  # Gemm 1-6: the ``broadcast`` attribute decides how C broadcasts
    attributes = kernel_attributes("alpha", "beta", "transA", "transB")

    def build(self, node, inputs, outputs, values) -> Compute:
        alpha = np.float32(node.attrs.get("alpha", 1.0))
        beta = np.float32(node.attrs.get("beta", 1.0))
        trans_a, trans_b = bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0))

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            lhs = a[0].T if trans_a else a[0]
            rhs = a[1].T if trans_b else a[1]
            y = out[0]
            np.matmul(lhs, rhs, out=y)
            if alpha != 1:
                y *= alpha
            c = a[2] if len(a) > 2 else None
            if c is not None and beta != 0:
                y += c if beta == 1 else beta * c

        return compute


class MatMul(CpuKernel):
    """np.matmul; an N-D input times a 2-D matrix as one 2-D product (numpy's stacked
    matmul does not call BLAS for it: ten times slower for a [1, 1, 512] x [512, 1408]
    decoder projection)."""

    op_type = "MatMul"
    since_version = 1

    def build(self, node, inputs, outputs, values) -> Compute:
        a_shape, b_shape = inputs[0].shape, inputs[1].shape
        if len(b_shape) == 2 and len(a_shape) > 2:
            rows, k, n = int(np.prod(a_shape[:-1])), a_shape[-1], b_shape[1]
            return lambda a, out: np.matmul(a[0].reshape(rows, k), a[1],
                                            out=out[0].reshape(rows, n))
        return lambda a, out: np.matmul(a[0], a[1], out=out[0])


class BatchNormalization(CpuKernel):
    """Inference-mode BatchNormalization as one multiply-add with folded per-channel terms."""

    op_type = "BatchNormalization"
    since_version = 7  # 6: is_test; inference statistics only (training_mode=0)
    attributes = kernel_attributes("epsilon", "momentum", spatial=(1,), training_mode=(0,))

    def accepts(self, node, inputs, outputs) -> bool:
        one_output = len([o for o in node.outputs if o]) == 1
        spatial = node.attrs.get("spatial", 1) == 1  # opset < 9 per-activation stats: portable
        inference = not node.attrs.get("training_mode", 0)
        return one_output and spatial and inference and len(inputs[0].shape) >= 2

    def build(self, node, inputs, outputs, values) -> Compute:
        eps = float(node.attrs.get("epsilon", 1e-5))
        bcast = (inputs[0].shape[1],) + (1,) * (len(inputs[0].shape) - 2)

        def fold(scale, bias, mean, var) -> tuple[np.ndarray, np.ndarray]:
            mul = (scale / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
            return mul.reshape(bcast), (bias - mean * mul).astype(np.float32).reshape(bcast)

        stats = [_known(values, i) for i in range(1, 5)]
        folded = fold(*stats) if all(s is not None for s in stats) else None

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            mul, add = folded or fold(*a[1:5])
            np.multiply(a[0], mul, out=out[0])
            out[0] += add

        return compute


class _Unary(CpuKernel):
    since_version = 6  # 1-5: consumed_inputs
    fn: ClassVar[Callable[[np.ndarray, np.ndarray], Any]]

    def build(self, node, inputs, outputs, values) -> Compute:
        fn = type(self).fn
        return lambda a, out: fn(a[0], out[0])


class Relu(_Unary):
    op_type = "Relu"
    fn = staticmethod(lambda x, y: relu_into(x, y))


class Tanh(_Unary):
    op_type = "Tanh"
    fn = staticmethod(lambda x, y: np.tanh(x, out=y))


class Sigmoid(_Unary):
    op_type = "Sigmoid"

    @staticmethod
    def fn(x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(y, x)
        _sigmoid_inplace(y)


class Erf(_Unary):
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below float32 resolution near 1):
    numpy has no erf ufunc."""

    op_type = "Erf"
    since_version = 9

    @staticmethod
    def fn(x: np.ndarray, y: np.ndarray) -> None:
        a = np.abs(x, dtype=np.float64)
        t = 1.0 / (1.0 + 0.3275911 * a)
        poly = t * (
            0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        np.copyto(y, np.copysign(1.0 - poly * np.exp(-a * a), x), casting="same_kind")


class _Binary(CpuKernel):
    since_version = 7  # 1-6: ``broadcast``/``axis`` attributes, not numpy broadcasting
    ufunc: ClassVar[np.ufunc]

    def build(self, node, inputs, outputs, values) -> Compute:
        ufunc = type(self).ufunc
        return lambda a, out: ufunc(a[0], a[1], out=out[0])


class Add(_Binary):
    op_type, ufunc = "Add", np.add


class Sub(_Binary):
    op_type, ufunc = "Sub", np.subtract


class Mul(_Binary):
    op_type, ufunc = "Mul", np.multiply


class Div(_Binary):
    op_type, ufunc = "Div", np.divide


class Clip(CpuKernel):
    """Clip with min/max from attributes (opset < 11) or inputs (constant or not)."""

    op_type = "Clip"
    since_version = 6  # 6-10: min/max attributes; 11+: inputs (both handled in build)
    attributes = kernel_attributes("min", "max")
    dtype_inputs = (0, 1, 2)

    def build(self, node, inputs, outputs, values) -> Compute:
        if node.opset and node.opset < 11:  # attribute defaults: the float32 range, not inf
            big = float(np.finfo(np.float32).max)
            lo, hi = node.attrs.get("min", -big), node.attrs.get("max", big)
            bounds = (np.float32(lo), np.float32(hi))
        else:
            bounds = None

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            lo, hi = bounds or (
                a[1] if len(a) > 1 and a[1] is not None else -np.inf,
                a[2] if len(a) > 2 and a[2] is not None else np.inf,
            )
            # np.clip is minimum(maximum(x, lo), hi) in one pass: min > max gives max
            # everywhere, as the ONNX spec says; NaN propagates.
            np.clip(a[0], lo, hi, out=out[0])

        return compute


class Softmax(CpuKernel):
    """Both epochs: < 13 coerces the input to 2-D at ``axis`` (default 1), 13+ normalises
    along ``axis`` (default -1)."""

    op_type = "Softmax"
    since_version = 1
    attributes = kernel_attributes("axis")

    def build(self, node, inputs, outputs, values) -> Compute:
        shape = inputs[0].shape
        legacy = bool(node.opset) and node.opset < 13  # coerced to 2-D at ``axis``
        axis = int(node.attrs.get("axis", 1 if legacy else -1)) % len(shape)
        if legacy:
            rows = int(np.prod(shape[:axis], dtype=np.int64))
            view, axis = (rows, int(np.prod(shape[axis:], dtype=np.int64))), 1
        else:
            view = shape

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            x, y = a[0].reshape(view), out[0].reshape(view)
            np.subtract(x, x.max(axis=axis, keepdims=True), out=y)
            np.exp(y, out=y)
            y /= y.sum(axis=axis, keepdims=True)

        return compute


class Concat(CpuKernel):
    """Any stored dtype: one ``np.concatenate`` into the output buffer."""

    op_type = "Concat"
    since_version = 4  # 1-3: ``axis`` optional (default 1)
    attributes = kernel_attributes("axis")
    dtypes = frozenset(DType) - {DType.bfloat16}

    def accepts(self, node, inputs, outputs) -> bool:
        return len({i.dtype for i in inputs if i is not None}) == 1

    def build(self, node, inputs, outputs, values) -> Compute:
        axis = int(node.attrs["axis"]) % len(outputs[0].shape)

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            parts = [x for x in a if x is not None and x.size]
            if parts:  # all empty: so is the output
                np.concatenate(parts, axis=axis, out=out[0])

        return compute


KERNELS: list[type[CpuKernel]] = [
    Conv,
    MaxPool,
    AveragePool,
    GlobalAveragePool,
    GlobalMaxPool,
    Gemm,
    MatMul,
    BatchNormalization,
    Relu,
    Tanh,
    Sigmoid,
    Add,
    Sub,
    Mul,
    Div,
    Clip,
    Softmax,
    Concat,
    Erf,
]
