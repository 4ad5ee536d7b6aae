"""The elementwise op pattern: ``UnaryOp`` (one ``@helper`` per element, run by
``common.unary_map`` or ``unary_map_params`` when the op has float attributes), dtype groups
and the sample values op cases are built from.

The numpy reference, computed in float64 for float inputs, is the truth the conformance suite
compares against.
"""


from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Helper
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import check_dtype, unary_map, unary_map_params

FLOATS = (DType.float32, DType.float16, DType.float64, DType.bfloat16)
SIGNED_INTS = (DType.int8, DType.int16, DType.int32, DType.int64)
UNSIGNED_INTS = (DType.uint8, DType.uint16, DType.uint32, DType.uint64)
SIGNED = FLOATS + SIGNED_INTS
NUMERIC = SIGNED + UNSIGNED_INTS

_SPECIALS = (math.nan, math.inf, -math.inf, 0.0, -0.0)
erf_np = np.vectorize(math.erf, otypes=[np.float64])


def sample(shape: Sequence[int], dtype: Any, lo: float = -4.0, hi: float = 4.0,
           seed: int = 0, specials: bool = True) -> np.ndarray:
    """Random values in [lo, hi) of ``dtype``; floats start with NaN, ±Inf, ±0 when asked."""
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        a = r.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, size=shape)
        return a.astype(dt)
    if dt == np.bool_:
        return r.integers(0, 2, size=shape).astype(bool)
    a = r.uniform(lo, hi, size=shape).astype(dt)
    if specials and a.size:
        flat = a.reshape(-1)
        k = min(len(_SPECIALS), flat.size)
        flat[:k] = np.array(_SPECIALS[:k], dt)
    return a


def as_f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) if x.dtype.kind == "f" else x


class UnaryOp(OpDef):
    """An elementwise op: same shape in and out; float attributes become kernel constants."""

    fn: Helper
    numpy_fn: Callable[..., np.ndarray]
    dtypes: Sequence[DType] = FLOATS
    out_dtype: ClassVar[DType | None] = None  # None: the input's dtype
    attributes: ClassVar[tuple[tuple[str, float], ...]] = ()  # (name, default)
    variants: ClassVar[tuple[dict[str, Any], ...]] = ()  # attribute sets the cases probe
    domain_range: ClassVar[tuple[float, float]] = (-4.0, 4.0)  # sampled input values
    tol: ClassVar[dict[str, float]] = {"rtol": 1e-5, "atol": 1e-5}

    def params(self, node: Node) -> tuple[float, ...]:
        values = []
        for name, default in self.attributes:
            v = self.attr(node, name, default)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise self.fail(node, f"attribute {name!r} must be a number, got {v!r}")
            values.append(float(v))
        return tuple(values)

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if not inputs or inputs[0] is None:
            raise self.fail(node, "input 0 is required")
        x = inputs[0]
        check_dtype(node, x.dtype, self.dtypes)
        self.params(node)
        return [TensorInfo(self.out_dtype or x.dtype, x.shape)]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        out = self.out_dtype.numpy if self.out_dtype else x.dtype
        with np.errstate(all="ignore"):
            y = type(self).numpy_fn(as_f64(x), *self.params(node))
            return [np.asarray(y).astype(out)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        params = self.params(node)
        if params:
            low.launch(unary_map_params, [In(0)], Out(0), fn=type(self).fn, params=params)
        else:
            low.launch(unary_map, [In(0)], Out(0), fn=type(self).fn)
        return low

    def cases(self) -> list[OpCase]:
        lo, hi = self.domain_range
        tol = dict(self.tol)
        cases = [
            OpCase("f32_specials", [sample((4, 5), np.float32, lo, hi, 1)], **tol),
            OpCase("f32_scalar", [np.array(0.5 * (lo + hi) + 0.25, np.float32)], **tol),
            OpCase("f32_empty", [np.zeros((0, 3), np.float32)], **tol),
        ]
        if DType.float16 in self.dtypes:
            cases.append(OpCase("f16", [sample((3, 4), np.float16, lo, hi, 2)], **tol))
        if DType.float64 in self.dtypes:
            cases.append(OpCase("f64", [sample((7,), np.float64, lo, hi, 3)], **tol))
        for dt in (DType.int8, DType.int32, DType.int64, DType.uint8, DType.uint32):
            if dt in self.dtypes:
                ilo = 0 if dt.is_unsigned_int else -100
                cases.append(OpCase(f"{dt}", [sample((2, 5), dt.numpy, ilo, 100, 4)]))
        for i, attrs in enumerate(self.variants):
            cases.append(OpCase(f"attrs{i}", [sample((3, 4), np.float32, lo, hi, 5 + i)],
                                attrs=dict(attrs), **tol))
        return cases


def unary(op_type: str, since: int, fn: Helper, numpy_fn: Callable[..., np.ndarray],
          dtypes: Sequence[DType] = FLOATS, base: type[UnaryOp] | None = None,
          **extra: Any) -> Any:
    """Declare a UnaryOp subclass (most ops differ only in these fields)."""
    body = {"op_type": op_type, "since_version": since, "fn": fn,
            "numpy_fn": staticmethod(numpy_fn), "dtypes": tuple(dtypes), **extra}
    return type(op_type, (base or UnaryOp,), body)


