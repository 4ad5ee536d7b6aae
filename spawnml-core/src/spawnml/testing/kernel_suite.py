"""The kernel suite: kernels covering the whole language, each with a numpy reference.

Every backend runs it (``check_case(backend, case)``); exclusions come only from a
backend's declared capabilities (``unsupported_reason``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backend import Backend
from ..dtypes import DType, dtype as as_dtype
from ..kernel import Kernel, run_kernel
from . import suite_kernels as K

F32 = {"rtol": 1e-6, "atol": 1e-6}
MATH = {"rtol": 2e-5, "atol": 2e-6}
EXACT = {"rtol": 0.0, "atol": 0.0}
F16 = {"rtol": 2e-3, "atol": 2e-3}


@dataclass
class KernelCase:
    name: str
    kernel: Kernel
    inputs: dict[str, np.ndarray]
    out_shape: tuple[int, ...]
    out_dtype: DType
    reference: np.ndarray
    consts: dict[str, Any] = field(default_factory=dict)
    rtol: float = 1e-6
    atol: float = 1e-6
    needs_int64_range: bool = False  # values outside int32: only where int64 is native

    def run(self, backend: Backend) -> np.ndarray:
        return run_kernel(
            backend, self.kernel, self.inputs, self.out_shape, self.out_dtype, **self.consts
        )


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _case(
    name: str,
    kernel: Kernel,
    inputs: dict[str, np.ndarray],
    reference: np.ndarray,
    tol: dict[str, float],
    out_dtype: Any = None,
    **consts: Any,
) -> KernelCase:
    ref = np.asarray(reference)
    dt = as_dtype(out_dtype if out_dtype is not None else ref.dtype)
    return KernelCase(name, kernel, inputs, ref.shape, dt, ref.astype(dt.numpy), consts, **tol)


def _edge_f32(n: int, seed: int) -> np.ndarray:
    r = _rng(seed)
    x = r.standard_normal(n).astype(np.float32) * 3
    specials = np.array(
        [
            0.0,
            -0.0,
            np.nan,
            np.inf,
            -np.inf,
            1e-40,
            -1e-40,
            3.4e38,
            -3.4e38,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
        ],
        np.float32,
    )
    x[: len(specials)] = specials
    return x


_UNARY: list[
    tuple[str, int, Callable[[np.ndarray], np.ndarray], Callable[[np.random.Generator], np.ndarray]]
] = [
    ("exp", 0, np.exp, lambda r: r.uniform(-80, 80, 500)),
    (
        "log",
        1,
        np.log,
        lambda r: np.concatenate([r.uniform(1e-30, 1e4, 496), [0.0, -1.0, np.inf, np.nan]]),
    ),
    ("sqrt", 2, np.sqrt, lambda r: np.concatenate([r.uniform(0, 1e6, 497), [0.0, -1.0, np.inf]])),
    ("rsqrt", 3, lambda x: 1 / np.sqrt(x), lambda r: r.uniform(1e-6, 1e6, 500)),
    ("sin", 4, np.sin, lambda r: r.uniform(-100, 100, 500)),
    ("cos", 5, np.cos, lambda r: r.uniform(-100, 100, 500)),
    ("tan", 6, np.tan, lambda r: r.uniform(-1.4, 1.4, 500)),
    (
        "tanh",
        7,
        np.tanh,
        lambda r: np.concatenate([r.uniform(-20, 20, 496), [0.0, np.inf, -np.inf, np.nan]]),
    ),
    (
        "erf",
        8,
        np.vectorize(math.erf, otypes=[np.float64]),
        lambda r: np.concatenate([r.uniform(-6, 6, 495), [0.0, 1e-8, -1e-8, np.inf, -np.inf]]),
    ),
    ("floor", 9, np.floor, lambda r: _edge_f32(500, 1)),
    ("ceil", 10, np.ceil, lambda r: _edge_f32(500, 2)),
    (
        "round",
        11,
        np.rint,
        lambda r: np.concatenate([np.arange(-5.5, 6, 0.5), r.uniform(-1e3, 1e3, 477)]),
    ),
    ("sign", 12, np.sign, lambda r: _edge_f32(500, 3)),
    ("abs", 13, np.abs, lambda r: _edge_f32(500, 4)),
    ("trunc", 14, np.trunc, lambda r: _edge_f32(500, 5)),
    ("asin", 15, np.arcsin, lambda r: r.uniform(-1, 1, 500)),
    ("acos", 16, np.arccos, lambda r: r.uniform(-1, 1, 500)),
    ("atan", 17, np.arctan, lambda r: r.uniform(-50, 50, 500)),
    ("sinh", 18, np.sinh, lambda r: r.uniform(-10, 10, 500)),
    ("cosh", 19, np.cosh, lambda r: r.uniform(-10, 10, 500)),
    ("asinh", 20, np.arcsinh, lambda r: r.uniform(-100, 100, 500)),
    (  # below 1: NaN (Mesa's acosh(-1e10) is -inf: log(x + sqrt(x * x - 1)) = log(0))
        "acosh",
        21,
        np.arccosh,
        lambda r: np.concatenate([r.uniform(1, 100, 496), [0.5, -1.0, -1e10, np.nan]]),
    ),
    ("atanh", 22, np.arctanh, lambda r: r.uniform(-0.99, 0.99, 500)),
    ("exp2", 23, np.exp2, lambda r: r.uniform(-100, 100, 500)),
    ("log2", 24, np.log2, lambda r: r.uniform(1e-20, 1e20, 500)),
]

_BINARY = [
    ("mul", 0, np.multiply),
    ("sub", 1, np.subtract),
    ("div", 2, np.divide),
    ("min", 3, np.minimum),
    ("max", 4, np.maximum),
    ("pow", 5, np.power),
    ("atan2", 6, np.arctan2),
    ("floordiv", 7, np.floor_divide),
    ("pymod", 8, np.mod),
    ("fmod", 9, np.fmod),
]


def _int_ref(op: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x64, y64 = x.astype(np.int64), y.astype(np.int64)
    safe = np.where(y64 == 0, 1, y64)
    if op == 0:
        r = np.where(y64 == 0, 0, np.floor_divide(x64, safe))
    elif op == 1:
        r = np.where(y64 == 0, 0, np.mod(x64, safe))
    elif op == 2:
        r = np.where(y64 == 0, 0, np.trunc(x64 / safe).astype(np.int64))
    elif op == 3:
        r = np.where(y64 == 0, 0, np.fmod(x64, safe))
    elif op == 4:
        r = (x64 & y64) | (x64 ^ 7)
    elif op == 5:
        r = ((x64 << 3) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64) >> 1
    elif op == 6:
        r = ~x64
    elif op == 7:
        r = np.abs(x64) + np.sign(y64)
    else:
        r = np.minimum(x64, y64) * 3 - np.maximum(x64, y64)
    return r.astype(np.int32)


def _conv_ref(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray,
    stride: tuple,
    pad: tuple,
    dilation: tuple,
    groups: int,
) -> np.ndarray:
    n, _, h, wd = x.shape
    co, cig, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, co, oh, ow))
    cog = co // groups
    for o in range(co):
        g = o // cog
        for ky in range(kh):
            for kx in range(kw):
                ys, xs = ky * dilation[0], kx * dilation[1]
                patch = xp[
                    :,
                    g * cig : (g + 1) * cig,
                    ys : ys + stride[0] * oh : stride[0],
                    xs : xs + stride[1] * ow : stride[1],
                ]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, ky, kx])
        out[:, o] += b[o]
    return out


def _pool_ref(
    x: np.ndarray,
    k: tuple,
    stride: tuple,
    pad: tuple,
    dilation: tuple,
    mode: str,
    include_pad: bool = False,
) -> np.ndarray:
    n, c, h, w = x.shape
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(
        x.astype(np.float64),
        ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
        constant_values=fill,
    )
    ones = np.pad(np.ones((h, w)), ((pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            ys = slice(i * stride[0], i * stride[0] + dilation[0] * (k[0] - 1) + 1, dilation[0])
            xs = slice(j * stride[1], j * stride[1] + dilation[1] * (k[1] - 1) + 1, dilation[1])
            win = xp[:, :, ys, xs]
            if mode == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = win[0, 0].size if include_pad else ones[ys, xs].sum()
                if include_pad:  # the window clipped to the padded extent
                    y_end = min(i * stride[0] + k[0], h + 2 * pad[0])
                    x_end = min(j * stride[1] + k[1], w + 2 * pad[1])
                    cnt = (y_end - i * stride[0]) * (x_end - j * stride[1])
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


def build_cases() -> list[KernelCase]:
    """All cases, deterministic (fixed seeds)."""
    cases: list[KernelCase] = []
    add = cases.append
    r = _rng(0)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731

    # -- elementwise and broadcasting
    a, b = f(2, 3, 4), f(3, 1)
    add(_case("add_broadcast", K.add_broadcast, {"a": a, "b": b}, a + b, F32))
    a, b = f(5), np.array(2.5, np.float32)
    add(_case("add_scalar_0d", K.add_broadcast, {"a": a, "b": b}, a + b, F32))
    a, b = f(1, 4, 1), f(3, 1, 5)
    add(_case("add_size1_dims", K.add_broadcast, {"a": a, "b": b}, a + b, F32))
    a, b = np.zeros((0, 3), np.float32), f(3)
    add(_case("add_size0", K.add_broadcast, {"a": a, "b": b}, a + b, F32))
    for name, op, fn in _BINARY:
        x = f(4, 6) * 3
        y = f(6) * 3
        if name == "pow":
            x = np.abs(x) + 0.1
        if name in ("floordiv", "pymod", "fmod", "div"):
            y = np.where(np.abs(y) < 0.2, 0.7, y).astype(np.float32)
        with np.errstate(all="ignore"):
            ref = fn(x.astype(np.float64), y.astype(np.float64))
        tol = MATH if name in ("pow", "atan2", "div") else F32
        if name in ("floordiv", "pymod", "fmod"):
            tol = {"rtol": 1e-5, "atol": 1e-5}
        add(_case(f"binary_{name}", K.binary, {"a": x, "b": y}, ref, tol, np.float32, op=op))
    xn = np.array([1.0, np.nan, -np.inf, 2.0], np.float32)
    yn = np.array([np.nan, 1.0, 3.0, np.inf], np.float32)
    add(
        _case(
            "nan_minmax",
            K.nan_minmax,
            {"a": xn, "b": yn},
            np.minimum(xn, yn) + np.maximum(xn, yn),
            F32,
        )
    )
    for name, op, fn, gen in _UNARY:
        x = gen(_rng(op + 100)).astype(np.float32)
        with np.errstate(all="ignore"):
            ref = fn(x.astype(np.float64))
        tol = EXACT if name in ("floor", "ceil", "round", "sign", "abs", "trunc") else MATH
        add(_case(f"unary_{name}", K.unary, {"x": x}, ref, tol, np.float32, op=op))
    x = _edge_f32(64, 7)
    add(_case("relu_edges", K.relu, {"x": x}, np.maximum(x, 0), EXACT))
    x = f(3, 5)
    add(
        _case(
            "leaky_relu",
            K.leaky_relu,
            {"x": x},
            np.where(x >= 0, x, x * np.float32(0.2)),
            F32,
            alpha=0.2,
        )
    )
    x = f(100) * 5
    add(
        _case(
            "sigmoid",
            K.sigmoid,
            {"x": x},
            1 / (1 + np.exp(-x.astype(np.float64))),
            MATH,
            np.float32,
        )
    )
    # tanh must saturate to exactly -1 (and 1): 1 + tanh(x) is then 0, and GELU's tanh form
    # gives NaN at -inf (-inf * 0) and -0 below about -9, as numpy does. OpenCL allows tanh
    # a few ulps, and PoCL's returns -0.99999994 there (1 + tanh = 6e-8).
    x = np.array([-np.inf, -1e30, -50.0, -20.0, -10.0], np.float32)
    add(_case("tanh_saturates_exactly", K.one_plus_tanh, {"x": x}, np.zeros(5), EXACT,
              np.float32))
    # ... and keep its relative accuracy near 0, where tanh(x) ~ x: a (e^2x - 1) / (e^2x + 1)
    # form cancels (lavapipe's WGSL tanh: 19% off at 1e-7). Relative tolerance only.
    x = np.concatenate([np.geomspace(1e-7, 0.3, 24), -np.geomspace(3e-7, 0.1, 8)])
    x = x.astype(np.float32)
    add(_case("tanh_small_arguments", K.unary, {"x": x}, np.tanh(x.astype(np.float64)),
              {"rtol": 1e-6, "atol": 0.0}, np.float32, op=7))
    # log(1 + x) for tiny x without a rounding trick that shader compilers fold away
    # (Goldberg's log(u) * x / (u - 1): Mesa folds (1 + x) - 1 to x, 4e-4 off at 4.5e-5).
    x = np.concatenate([np.geomspace(1e-30, 0.5, 24), -np.geomspace(1e-8, 0.5, 8),
                        [0.6, 3.0, 1e6, -0.75, 0.0]]).astype(np.float32)
    add(_case("log1p_small_arguments", K.log1p, {"x": x}, np.log1p(x.astype(np.float64)),
              {"rtol": 1e-6, "atol": 0.0}, np.float32))
    # exp(x) - 1 near 0 (Elu, Selu, Celu): exp's rounding would cost 6e-4 relative at 1e-4
    x = np.concatenate([np.geomspace(1e-30, 0.5, 20), -np.geomspace(1e-8, 0.5, 10),
                        [0.7, 5.0, -3.0, -100.0, 0.0]]).astype(np.float32)
    add(_case("expm1_small_arguments", K.expm1, {"x": x}, np.expm1(x.astype(np.float64)),
              {"rtol": 1e-6, "atol": 0.0}, np.float32))
    x = f(200) * 3
    x64 = x.astype(np.float64)
    add(
        _case(
            "gelu_tanh",
            K.gelu_tanh,
            {"x": x},
            0.5 * x64 * (1 + np.tanh(0.7978845608028654 * (x64 + 0.044715 * x64**3))),
            MATH,
            np.float32,
        )
    )
    erf = np.vectorize(math.erf)
    add(
        _case(
            "gelu_erf",
            K.gelu_erf,
            {"x": x},
            0.5 * x64 * (1 + erf(x64 / math.sqrt(2))),
            MATH,
            np.float32,
        )
    )
    x = np.linspace(-5, 5, 41).astype(np.float32)
    add(
        _case(
            "hard_swish_elif",
            K.hard_swish_piecewise,
            {"x": x},
            np.where(x <= -3, 0, np.where(x >= 3, x, x * (x + 3) / 6)),
            F32,
        )
    )
    x = _edge_f32(50, 8)
    add(
        _case(
            "clip", K.clip, {"x": x}, np.minimum(np.maximum(x, -1.0), 2.0), EXACT, lo=-1.0, hi=2.0
        )
    )
    c = r.random((3, 1)) > 0.5
    a, b = f(3, 4), f(4)
    add(_case("where_bool_broadcast", K.where, {"c": c, "a": a, "b": b}, np.where(c, a, b), EXACT))
    x = np.array([0.0, 1.0, 200.0, -200.0, np.nan, -3.0], np.float32)
    ref = np.array([np.nan, 1.0, np.inf, -np.inf, 7.0, -3.0], np.float32)
    add(_case("nan_inf_literals", K.special_values, {"x": x}, ref, EXACT))
    x = _edge_f32(32, 9)
    for which, fn in enumerate((np.isnan, np.isinf, np.isfinite)):
        add(_case(f"is_{fn.__name__}", K.is_nan_or_inf, {"x": x}, fn(x), EXACT, which=which))
    x = np.array([1.0, 0.5, 2.99, -1.0, 1.01, np.nan], np.float32)
    add(
        _case(
            "chained_compare", K.in_range, {"x": x}, (x >= 1.0) & (x < 3.0), EXACT, lo=1.0, hi=3.0
        )
    )

    # -- casts, f16, bool, integer semantics
    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.9, 1e6, -1e6], np.float32)
    add(_case("cast_f32_i32_truncates", K.convert, {"x": x}, np.trunc(x).astype(np.int32), EXACT))
    xi = np.array([-7, 0, 3, 16777217, -(2**31)], np.int32)
    add(_case("cast_i32_f32", K.convert, {"x": xi}, xi.astype(np.float32), EXACT))
    x = f(100) * 1000
    add(_case("cast_f32_f16_rounds", K.convert, {"x": x}, x.astype(np.float16), EXACT))
    xh = (f(50) * 100).astype(np.float16)
    add(_case("cast_f16_f32", K.convert, {"x": xh}, xh.astype(np.float32), EXACT))
    xb = r.random(10) > 0.5
    add(_case("cast_bool_f32", K.convert, {"x": xb}, xb.astype(np.float32), EXACT))
    x = np.array([0.0, -0.0, 1.0, np.nan, -2.0], np.float32)
    add(_case("cast_f32_bool", K.convert, {"x": x}, x != 0, EXACT))
    xu8 = np.array([0, 1, 127, 128, 255], np.uint8)
    add(_case("cast_u8_f32", K.convert, {"x": xu8}, xu8.astype(np.float32), EXACT))
    ah, bh, ch = ((f(64) * 4).astype(np.float16) for _ in range(3))
    ref = (ah.astype(np.float32) * bh.astype(np.float32) + ch.astype(np.float32)).astype(np.float16)
    add(_case("f16_arithmetic", K.fma_f16, {"a": ah, "b": bh, "c": ch}, ref, F16))
    p, q = r.random(16) > 0.5, r.random(16) > 0.5
    idx = np.arange(16)
    ref = np.where(idx % 2 == 0, (p & ~q) | (q ^ (p | q)), ~(p & q))
    add(_case("bool_logic", K.bool_logic, {"a": p, "b": q}, ref, EXACT))
    xi = np.array([7, -7, 7, -7, 0, 5, -(2**31), 2**31 - 1, 13, -13, 1, -1], np.int32)
    yi = np.array([2, 2, -2, -2, 3, 0, -1, -1, 5, -5, -1, 0], np.int32)
    for op, name in enumerate(
        [
            "floordiv",
            "floormod",
            "truncdiv",
            "truncmod",
            "bitwise",
            "shift",
            "invert",
            "abs_sign",
            "minmax",
        ]
    ):
        with np.errstate(all="ignore"):
            ref = _int_ref(op, xi, yi)
        if op == 2:  # INT_MIN / -1 wraps
            ref[6] = -(2**31)
        if op == 0:
            ref[6] = -(2**31)
        add(_case(f"int_{name}", K.int_binary, {"a": xi, "b": yi}, ref, EXACT, op=op))
    x = np.arange(-20, 21, dtype=np.float32)
    i = x.astype(np.int64)
    add(
        _case(
            "index_math_negative",
            K.index_math,
            {"x": x},
            ((i - 7) // 3 * 10 + (i - 7) % 3 + (-i) // 4).astype(np.int32),
            EXACT,
            np.int32,
        )
    )
    xu = np.array([0, 1, 2, 4000000000, 123456789], np.uint32)
    ref = ((xu.astype(np.uint64) * 2654435761 + 12345) % 2**32).astype(np.uint32)
    add(_case("u32_wraparound", K.wrap_u32, {"a": xu}, ref, EXACT))
    a64 = np.array([1, -5, 2**20, -(2**20)], np.int64)
    b64 = np.array([2, 7, -3, 9], np.int64)
    add(_case("int64_in_int32_range", K.add_i64, {"a": a64, "b": b64}, a64 + b64 * 3, EXACT))
    a64 = np.array([2**40, -(2**35), 5], np.int64)
    case = _case(
        "int64_beyond_int32", K.add_i64, {"a": a64, "b": b64[:3]}, a64 + b64[:3] * 3, EXACT
    )
    case.needs_int64_range = True
    add(case)

    # -- reductions
    x = f(3, 7, 5)
    for op, name, fn in [
        (0, "sum", np.sum),
        (1, "max", np.max),
        (2, "min", np.min),
        (3, "mean", np.mean),
        (4, "prod", np.prod),
        (5, "sumsq", lambda v, axis: np.sum(v * v, axis=axis)),
    ]:
        axis = op % 3
        add(
            _case(
                f"reduce_{name}_axis{axis}",
                K.reduce,
                {"x": x},
                fn(x.astype(np.float64), axis=axis),
                {"rtol": 1e-5, "atol": 1e-5},
                np.float32,
                axis=axis,
                op=op,
            )
        )
    x = np.zeros((4, 0), np.float32)
    add(
        _case(
            "reduce_sum_empty_axis",
            K.reduce,
            {"x": x},
            np.zeros(4),
            EXACT,
            np.float32,
            axis=1,
            op=0,
        )
    )
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, -1.0, -2.0]], np.float32)
    add(_case("reduce_max_nan_inf", K.reduce, {"x": x}, np.max(x, axis=1), EXACT, axis=1, op=1))
    x = f(6, 9)
    x[2, 3] = x[2, 7] = 10.0  # ties keep the first index
    add(_case("argmax_rows", K.argmax, {"x": x}, np.argmax(x, axis=1).astype(np.int32), EXACT))
    x = f(5, 33) * 4
    sm = np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(
        1, keepdims=True
    )
    add(_case("softmax_fused", K.softmax_fused, {"x": x}, sm, MATH))
    m = x.max(1)
    stats = np.stack([m, np.exp(x - m[:, None]).sum(1)], 1)
    add(_case("softmax_stats", K.softmax_stats, {"x": x}, stats, MATH))
    add(
        _case(
            "softmax_apply", K.softmax_apply, {"x": x, "stats": stats.astype(np.float32)}, sm, MATH
        )
    )
    x = f(4, 6)
    add(
        _case(
            "cumsum_inclusive",
            K.cumsum_rows,
            {"x": x},
            np.cumsum(x, 1),
            {"rtol": 1e-5, "atol": 1e-5},
            exclusive=False,
        )
    )
    add(
        _case(
            "cumsum_exclusive",
            K.cumsum_rows,
            {"x": x},
            np.cumsum(x, 1) - x,
            {"rtol": 1e-5, "atol": 1e-5},
            exclusive=True,
        )
    )
    w = np.arange(1, 7, dtype=np.float64)
    ref = np.array([[np.sum((x[i] * w)[j:]) for j in range(6)] for i in range(4)])
    add(
        _case(
            "negative_step_loop",
            K.reverse_loop,
            {"x": x},
            ref,
            {"rtol": 1e-5, "atol": 1e-5},
            np.float32,
        )
    )
    x = f(5, 8)
    ref = np.array([next((k for k in range(8) if x[i, k] > 0.8), -1) for i in range(5)], np.int32)
    add(_case("early_return_in_loop", K.first_above, {"x": x}, ref, EXACT, threshold=0.8))

    # -- convolution and pooling
    for name, (xs, ws, stride, pad, dil, groups) in {
        "conv2d_basic": ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
        "conv2d_stride_dilation": ((2, 4, 9, 7), (6, 4, 3, 2), (2, 1), (2, 0), (2, 3), 1),
        "conv2d_groups": ((1, 6, 6, 6), (4, 3, 3, 3), (1, 2), (1, 1), (1, 1), 2),
        "conv2d_depthwise": ((1, 5, 7, 7), (5, 1, 3, 3), (2, 2), (1, 1), (1, 1), 5),
        "conv2d_1x1": ((1, 16, 5, 5), (8, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    }.items():
        x, wt, bias = f(*xs), f(*ws), f(ws[0])
        ref = _conv_ref(x, wt, bias, stride, pad, dil, groups)
        add(
            _case(
                name,
                K.conv2d,
                {"x": x, "w": wt, "bias": bias},
                ref,
                {"rtol": 1e-5, "atol": 1e-5},
                np.float32,
                stride=stride,
                pad=pad,
                dilation=dil,
                groups=groups,
            )
        )
    x = f(2, 3, 9, 8)
    for name, (k, s, p, d) in {
        "maxpool_3x3_s2_p1": ((3, 3), (2, 2), (1, 1), (1, 1)),
        "maxpool_dilated": ((2, 2), (1, 1), (0, 0), (2, 2)),
    }.items():
        add(
            _case(
                name,
                K.max_pool2d,
                {"x": x},
                _pool_ref(x, k, s, p, d, "max"),
                EXACT,
                np.float32,
                kernel_shape=k,
                stride=s,
                pad=p,
                dilation=d,
            )
        )
    for include in (False, True):
        k, s, p = (3, 3), (2, 2), (1, 1)
        add(
            _case(
                f"avgpool_include_pad_{include}",
                K.avg_pool2d,
                {"x": x},
                _pool_ref(x, k, s, p, (1, 1), "avg", include),
                {"rtol": 1e-5, "atol": 1e-6},
                np.float32,
                kernel_shape=k,
                stride=s,
                pad=p,
                count_include_pad=include,
            )
        )
    add(
        _case(
            "global_avg_pool",
            K.global_avg_pool,
            {"x": x},
            x.mean((2, 3), keepdims=True),
            {"rtol": 1e-5, "atol": 1e-6},
        )
    )
    a, b = f(3, 4, 5), f(3, 5, 6)
    add(
        _case(
            "batched_matmul",
            K.matmul,
            {"a": a, "b": b},
            a.astype(np.float64) @ b,
            {"rtol": 1e-5, "atol": 1e-5},
            np.float32,
        )
    )

    # -- data movement
    x = f(2, 3, 4, 5)
    perm = (2, 0, 3, 1)
    add(_case("transpose_4d", K.transpose, {"x": x}, x.transpose(perm), EXACT, perm=perm))
    data = f(5, 4, 3)
    indices = np.array([[0, -1], [4, 2]], np.int64)
    add(
        _case(
            "gather_axis1_negative",
            K.gather,
            {"data": data, "indices": np.array([[0, -1], [3, 2]], np.int64)},
            np.take(data, np.array([[0, 3], [3, 2]]), axis=1),
            EXACT,
            axis=1,
        )
    )
    add(
        _case(
            "gather_axis0_i32",
            K.gather,
            {"data": data, "indices": indices.astype(np.int32)},
            np.take(data, np.where(indices < 0, indices + 5, indices), axis=0),
            EXACT,
            axis=0,
        )
    )
    a, b, c = f(2, 3, 4), f(2, 1, 4), f(2, 5, 4)
    add(
        _case(
            "concat3_axis1",
            K.concat3,
            {"a": a, "b": b, "c": c},
            np.concatenate([a, b, c], 1),
            EXACT,
            axis=1,
        )
    )
    x = f(6, 7)
    ref = x[4:0:-2, 1:7:3]
    add(
        _case(
            "slice_negative_steps",
            K.slice_steps,
            {"x": x},
            ref,
            EXACT,
            starts=(4, 1),
            steps=(-2, 3),
        )
    )
    x = f(3, 4)
    add(
        _case(
            "pad_reflect",
            K.pad_reflect,
            {"x": x},
            np.pad(x, ((2, 1), (3, 2)), mode="reflect"),
            EXACT,
            pads=(2, 3),
        )
    )
    x = f(3, 2, 1)
    add(_case("copy_reshape", K.copy, {"x": x}, x.reshape(6), EXACT))
    x = f(1)
    add(_case("copy_size1", K.copy, {"x": x}, x, EXACT))
    x = f(10)
    coeffs = (0.5, -1.0, 2.0, 0.25)
    add(
        _case(
            "helper_static_unroll",
            K.polynomial,
            {"x": x},
            np.polyval(np.array(coeffs), x.astype(np.float64)),
            MATH,
            np.float32,
            coeffs=coeffs,
        )
    )
    x = f(9)
    ref = np.concatenate([[0], x[:-1]]) + np.concatenate([x[1:], [0]])
    add(_case("masked_out_of_bounds_reads", K.guarded_neighbours, {"x": x}, ref, F32, np.float32))
    w = np.array([0.5, -1.0, 2.0], np.float32)
    padded = np.concatenate([[0.25], x, [0.25]])
    ref = np.array([padded[i:i + 3] @ w for i in range(x.size)], np.float32)
    add(_case("conditional_temporary_in_reduction", K.padded_taps, {"x": x, "w": w}, ref, F32,
              np.float32, fill=0.25))
    x = f(1, 7, 2, 3)
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (2, 2), (0, 0), (0, 0)))
    ref = sum(sq[:, k:k + 7] for k in range(5))
    add(_case("window_temporary_in_two_versions", K.window_sum_of_squares, {"x": x}, ref, F32,
              np.float32, size=5))
    return cases


CASES: list[KernelCase] = build_cases()


def unsupported_reason(backend: Backend, case: KernelCase) -> str | None:
    """Why ``backend`` cannot run ``case``, from its declared capabilities (None: it can)."""
    caps = backend.capabilities
    if case.needs_int64_range and DType.int64 not in caps.dtypes:
        return f"{backend.name} stores int64 as int32 (capabilities); values exceed int32"
    if caps.extras.get("flushes_denormals"):
        # GLSL ES 3.00 (4.5.1) lets shaders flush subnormals to zero; such a backend declares it.
        tiny = np.finfo(np.float32).tiny
        for name, array in case.inputs.items():
            a = np.asarray(array)
            if a.dtype.kind == "f" and np.any((a != 0) & (np.abs(a) < tiny)):
                return f"input {name!r} holds subnormal floats; {backend.name} flushes them to zero"
    return None


def check_case(backend: Backend, case: KernelCase) -> None:
    """Run ``case`` on ``backend`` and assert it matches the reference."""
    got = case.run(backend)
    assert got.shape == case.reference.shape, (
        f"{case.name}: shape {got.shape} != {case.reference.shape}"
    )
    assert got.dtype == case.reference.dtype, (
        f"{case.name}: dtype {got.dtype} != {case.reference.dtype}"
    )
    if case.out_dtype.is_float:
        np.testing.assert_allclose(
            got.astype(np.float64),
            case.reference.astype(np.float64),
            rtol=case.rtol,
            atol=case.atol,
            equal_nan=True,
            err_msg=f"kernel case {case.name} on {backend.name}",
        )
    else:
        np.testing.assert_array_equal(
            got, case.reference, err_msg=f"kernel case {case.name} on {backend.name}"
        )
