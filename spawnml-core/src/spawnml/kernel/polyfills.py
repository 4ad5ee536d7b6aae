"""Intrinsics written in the kernel language, for targets that lack them natively.

A target declares which intrinsics it has (``TargetTraits.intrinsics``); every other
intrinsic a kernel calls becomes, in the core lowering passes, a function of that target
specialised from the helper below, so all six targets compute it
from this one definition. ``_rawdiv``/``_rawmod`` (C-style division with a divisor known not
to be 0 or -1) are available only in this module.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ir
from .frontend import Helper, cast, cast_like, helper
from .traits import kinds
from .types import ScalarType, f32, u32

# fmt: off
# ruff: noqa: F821  (intrinsics such as exp, isnan, _rawdiv are resolved by the kernel front end)


@helper
def erf(x):
    """|error| < 1.2e-7 relative for |x| >= 0.5 (Numerical Recipes erfc), Taylor below."""
    a = abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    tail = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))))
    big = 1.0 - tail
    x2 = x * x
    small = x * (1.1283791670955126 + x2 * (-0.37612638903183754 + x2 * (0.11283791670955126
        + x2 * (-0.026866170645131252 + x2 * (0.005223977625442188
        + x2 * -0.0008548327023450853)))))
    return small if a < 0.5 else (big if x > 0.0 else -big)


@helper
def min_float(a, b):
    return a + b if isnan(a) or isnan(b) else (a if a < b else b)


@helper
def max_float(a, b):
    return a + b if isnan(a) or isnan(b) else (a if a > b else b)


@helper
def min_int(a, b):
    return a if a < b else b


@helper
def max_int(a, b):
    return a if a > b else b


@helper
def abs_num(x):
    return -x if x < 0 else x


@helper
def abs_unsigned(x):
    return x


@helper
def sign_float(x):
    return x if isnan(x) else cast_like(x > 0.0, x) - cast_like(x < 0.0, x)


@helper
def sign_int(x):
    return cast_like(x > 0, x) - cast_like(x < 0, x)


@helper
def truncdiv_signed(a, b):
    ok = b != 0 and b != -1
    q = _rawdiv(a, b if ok else 1)
    return q if ok else (0 - a if b == -1 else 0)


@helper
def truncmod_signed(a, b):
    ok = b != 0 and b != -1
    r = _rawmod(a, b if ok else 1)
    return r if ok else 0


@helper
def floordiv_signed(a, b):
    q = truncdiv_signed(a, b)
    r = truncmod_signed(a, b)
    return q - 1 if r != 0 and (r < 0) != (b < 0) else q


@helper
def floormod_signed(a, b):
    r = truncmod_signed(a, b)
    return r + b if r != 0 and (r < 0) != (b < 0) else r


@helper
def div_unsigned(a, b):
    q = _rawdiv(a, b if b != 0 else 1)
    return q if b != 0 else 0


@helper
def mod_unsigned(a, b):
    r = _rawmod(a, b if b != 0 else 1)
    return r if b != 0 else 0


@helper
def fmod_float(a, b):
    return a - b * trunc(a / b)


@helper
def pymod_float(a, b):
    r = fmod(a, b)
    return r + b if r != 0.0 and (r < 0.0) != (b < 0.0) else r


@helper
def isnan_f32(x):
    return (bitcast(x, u32) & 0x7FFFFFFF) > 0x7F800000


@helper
def isinf_f32(x):
    return (bitcast(x, u32) & 0x7FFFFFFF) == 0x7F800000


@helper
def isnan_f16(x):
    """f16 tests go through the f32 bit test (an f16 is exactly representable in f32)."""
    return isnan(cast(x, f32))


@helper
def isinf_f16(x):
    return isinf(cast(x, f32))


@helper
def isfinite_float(x):
    return not (isnan(x) or isinf(x))


@helper
def rsqrt_float(x):
    return 1.0 / sqrt(x)


@helper
def trunc_float(x):
    return floor(x) if x >= 0.0 else ceil(x)


@helper
def round_half_even(x):
    r = floor(x + 0.5)
    tie = r - x == 0.5
    return r - 1.0 if tie and pymod(r, 2.0) != 0.0 else r


# fmt: on

_Key = tuple[str, str]  # (intrinsic, "float" | "signed" | "unsigned" | "f32" ...)
POLYFILLS: dict[_Key, Helper] = {
    ("erf", "float"): erf,
    ("min", "float"): min_float, ("max", "float"): max_float,
    ("min", "int"): min_int, ("max", "int"): max_int,
    ("abs", "unsigned"): abs_unsigned, ("abs", "num"): abs_num,
    ("sign", "float"): sign_float, ("sign", "int"): sign_int,
    ("truncdiv", "signed"): truncdiv_signed, ("truncmod", "signed"): truncmod_signed,
    ("floordiv", "signed"): floordiv_signed, ("floormod", "signed"): floormod_signed,
    ("truncdiv", "unsigned"): div_unsigned, ("truncmod", "unsigned"): mod_unsigned,
    ("floordiv", "unsigned"): div_unsigned, ("floormod", "unsigned"): mod_unsigned,
    ("fmod", "float"): fmod_float, ("pymod", "float"): pymod_float,
    ("isnan", "f32"): isnan_f32, ("isinf", "f32"): isinf_f32,
    ("isnan", "f16"): isnan_f16, ("isinf", "f16"): isinf_f16,
    ("isfinite", "float"): isfinite_float,
    ("rsqrt", "float"): rsqrt_float, ("trunc", "float"): trunc_float,
    ("round", "float"): round_half_even,
}


def register_polyfill(name: str, kind: str, fn: Helper) -> None:
    """Add (or replace) the kernel-language definition of an intrinsic for a type kind."""
    POLYFILLS[(name, kind)] = fn


def polyfill_for(name: str, t: ScalarType) -> Helper | None:
    for kind in kinds(t):
        fn = POLYFILLS.get((name, kind))
        if fn is not None:
            return fn
    return None


def function_name(name: str, t: ScalarType) -> str:
    return f"sp_{name}_{t.value}"


def required_functions(
    body: tuple[ir.Stmt, ...],
    is_native: Callable[[str, ScalarType], bool],
    prepare: Callable[[ir.Function], ir.Function] | None = None,
) -> list[ir.Function]:
    """Polyfill functions ``body`` needs on a target, callees before callers; ``prepare``
    lowers each specialised function for the target before its own calls are resolved."""
    from ..errors import KernelTypeError
    from .specialize import specialize_function

    done: dict[str, ir.Function] = {}
    visiting: set[str] = set()

    def visit(stmts: tuple[ir.Stmt, ...]) -> None:
        for e in ir.all_exprs(stmts):
            if isinstance(e, ir.Call):
                t = e.args[0].type
                if is_native(e.fn, t):
                    continue
                fname = function_name(e.fn, t)
                if fname in done or fname in visiting:
                    continue
                h = polyfill_for(e.fn, t)
                if h is None:
                    raise KernelTypeError(f"intrinsic {e.fn}({t}) is neither native on this target "
                                          "nor defined in spawnml.kernel.polyfills")
                visiting.add(fname)
                fn = specialize_function(h, fname, [a.type for a in e.args])
                if prepare is not None:
                    fn = prepare(fn)
                visit(fn.body)
                visiting.discard(fname)
                done[fname] = fn

    visit(body)
    return list(done.values())


from . import polyfills_math  # noqa: E402,F401  (registers the transcendental polyfills)
