"""The intrinsic functions a kernel may call, with their typing rules.

Each renderer implements an intrinsic natively or falls back to the polyfill written in the
kernel language itself (``spawnml.kernel.polyfills``), so every target computes the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .types import ScalarType


@dataclass(frozen=True)
class Intrinsic:
    name: str
    arity: int
    accepts: str  # "float", "int", "num" (int or float), "any"
    result: str  # "same" (the argument type) or "bool"
    doc: str

    def result_type(self, arg: ScalarType) -> ScalarType:
        return ScalarType.bool if self.result == "bool" else arg

    def accepts_type(self, t: ScalarType) -> bool:
        return {
            "float": t.is_float,
            "int": t.is_int,
            "num": t.is_float or t.is_int,
            "any": True,
        }[self.accepts]


_TABLE: list[tuple[str, int, str, str, str]] = [
    # float -> float
    ("exp", 1, "float", "same", "e**x"),
    ("exp2", 1, "float", "same", "2**x"),
    ("log", 1, "float", "same", "natural logarithm (log(0) = -inf, log(<0) = nan)"),
    ("log2", 1, "float", "same", "base-2 logarithm"),
    ("sqrt", 1, "float", "same", "square root (sqrt(<0) = nan)"),
    ("rsqrt", 1, "float", "same", "1 / sqrt(x)"),
    ("sin", 1, "float", "same", "sine"),
    ("cos", 1, "float", "same", "cosine"),
    ("tan", 1, "float", "same", "tangent"),
    ("asin", 1, "float", "same", "arc sine"),
    ("acos", 1, "float", "same", "arc cosine"),
    ("atan", 1, "float", "same", "arc tangent"),
    ("sinh", 1, "float", "same", "hyperbolic sine"),
    ("cosh", 1, "float", "same", "hyperbolic cosine"),
    ("tanh", 1, "float", "same", "hyperbolic tangent"),
    ("asinh", 1, "float", "same", "inverse hyperbolic sine"),
    ("acosh", 1, "float", "same", "inverse hyperbolic cosine"),
    ("atanh", 1, "float", "same", "inverse hyperbolic tangent"),
    ("erf", 1, "float", "same", "error function"),
    ("floor", 1, "float", "same", "round toward -inf"),
    ("ceil", 1, "float", "same", "round toward +inf"),
    ("trunc", 1, "float", "same", "round toward zero"),
    ("round", 1, "float", "same", "round half to even"),
    ("pow", 2, "float", "same", "x**y (C pow semantics)"),
    ("atan2", 2, "float", "same", "atan(y/x) in the right quadrant"),
    ("fmod", 2, "float", "same", "C fmod: x - y*trunc(x/y), sign of x"),
    # numeric
    ("abs", 1, "num", "same", "absolute value"),
    ("sign", 1, "num", "same", "-1, 0 or 1 (nan for nan)"),
    ("min", 2, "num", "same", "smaller of two; nan if either is nan"),
    ("max", 2, "num", "same", "larger of two; nan if either is nan"),
    # predicates
    ("isnan", 1, "float", "bool", "x is NaN"),
    ("isinf", 1, "float", "bool", "x is +inf or -inf"),
    ("isfinite", 1, "float", "bool", "x is neither inf nor nan"),
    # integer division families (x // 0 == 0, x % 0 == 0, no trap anywhere)
    ("floordiv", 2, "int", "same", "Python //: rounds toward -inf"),
    ("floormod", 2, "int", "same", "Python %: result has the sign of the divisor"),
    ("truncdiv", 2, "int", "same", "C /: rounds toward zero"),
    ("truncmod", 2, "int", "same", "C %: result has the sign of the dividend"),
    ("pymod", 2, "float", "same", "Python float %: x - floor(x/y)*y"),
]

INTRINSICS: dict[str, Intrinsic] = {row[0]: Intrinsic(*row) for row in _TABLE}

# Names a kernel may call that are handled by the front end rather than the table.
SPECIAL_CALLS = frozenset(
    {"cast", "cast_like", "bitcast", "range", "static_range", "len", "float", "int", "bool"}
)


def _marker(name: str) -> Callable[..., object]:
    def fn(*args: object) -> object:
        raise RuntimeError(f"{name}() is a kernel-language intrinsic; call it inside a @kernel")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = INTRINSICS[name].doc if name in INTRINSICS else name
    return fn
