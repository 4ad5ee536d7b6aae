"""Transcendental intrinsics written in the kernel language, for targets without libm.

WebAssembly has only sqrt, floor, ceil, trunc, nearest, abs, min and max; every other math
intrinsic reaches it (and any future target lacking it) from the helpers below, through the
normal polyfill path. They are straight-line code (conditional expressions, no branches), so
a target may evaluate them lane-wise. Range reduction builds floats from bits (``bitcast``);
polynomials are Cephes' single-precision minimax fits.

Measured maximum error over dense sweeps against float64 numpy, in f32 ulps of the true
result (``spawnml-backend-wasm/tests/test_math_polyfills.py`` asserts the bounds of the last column;
the measured value is in parentheses):

=======  ====================================================  ==========================
helper   domain swept                                          max error (measured)
=======  ====================================================  ==========================
exp      [-104, 89], random bit patterns, +-inf, nan            1 ulp (0.98)
exp2     [-151, 129], random bit patterns                       1 ulp (0.96)
log      [1e-3, 1e3], random bit patterns (subnormals), 0, <0   1 ulp (0.77)
log2     as log; exact at every power of two                    1.5 ulp (1.47)
sin/cos  |x| <= 8192                                            1e-7 absolute (7.6e-8)
sin/cos  |x| <= 1e5                                             1e-6 absolute (9.6e-7)
tan      [-1.5, 1.5]                                            3 ulp (2.82)
asin     [-1, 1]                                                2.5 ulp (2.30)
acos     [-1, 1]                                                1.5 ulp (1.24)
atan     [-100, 100], random bit patterns                       3 ulp (2.65)
atan2    random pairs over 2**+-14; all zero/inf/nan pairs      3 ulp (2.78)
sinh     [-89.4, 89.4]                                          2 ulp (1.69)
cosh     [-89.4, 89.4]                                          2 ulp (1.69)
tanh     [-20, 20], random bit patterns                         1.5 ulp (1.19)
asinh    [-1e5, 1e5], random bit patterns                       3 ulp (2.63)
acosh    [1, 1e5]                                               2 ulp (1.84)
atanh    [-0.9999, 0.9999]                                      3.5 ulp (3.10)
pow      x in [2e-9, 5e8], y in [-10, 10]; t = |y * log2 x|     (2 + 2 t) ulp (112 at t=126)
pow      every pair of 0, -0, +-1, +-2, +-0.5, +-inf, nan, ...  exact (C99 special cases)
erf      [-6, 6] (``polyfills.erf``)                            3 ulp (2.84), 2e-7 absolute
=======  ====================================================  ==========================

sin, cos and tan reduce by pi/2 in three parts (Cody-Waite): beyond |x| = 1e5 the reduction
loses accuracy (3e-2 absolute at 1e6; meaningless, within [-1, 1] or nan, beyond 1e7); inf
gives nan. pow computes exp2(y * log2|x|) in f32, so its error grows with |y * log2 x| (a
double-f32 log2 would remove that). Specials follow C: +-inf, nan, signed zeros and
subnormal inputs and results were part of every sweep. ``round_f16`` rounds an f32 to
the nearest float16 value (ties to even, overflow to inf): targets that store float16 as f32
apply it on every cast to f16 and every f16 store.
"""

from __future__ import annotations

from .frontend import helper
from .polyfills import register_polyfill
from .types import f32, i32, u32

# fmt: off
# ruff: noqa: F821  (intrinsics such as floor, isnan are resolved by the kernel front end)

_INF = float("inf")


@helper
def _scale2(y, k):
    """y * 2**k for an integer-valued float k in [-152, 130]: two factors keep each normal,
    so a subnormal result is rounded once."""
    ki = cast(k, i32)
    k1 = ki >> 1
    k2 = ki - k1
    return y * bitcast((k1 + 127) << 23, f32) * bitcast((k2 + 127) << 23, f32)


@helper
def _exp_poly(r):
    """e**r for |r| <= ln(2)/2 (Cephes expf)."""
    return (((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
              + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1) * (r * r) + r + 1.0


@helper
def _copysign(r, x):
    """|r| with the sign bit of x."""
    return -r if bitcast(x, i32) < 0 else r


@helper
def exp_f32(x):
    xc = 89.0 if x > 89.0 else (-104.0 if x < -104.0 else x)  # nan passes through
    k = floor(xc * 1.44269504088896341 + 0.5)
    r = xc - k * 0.693359375 + k * 2.12194440e-4  # Cody-Waite: k * 0.693359375 is exact
    return _scale2(_exp_poly(r), k)


@helper
def exp2_f32(x):
    xc = 129.0 if x > 129.0 else (-151.0 if x < -151.0 else x)
    k = floor(xc + 0.5)
    r = (xc - k) * 0.693147180559945309
    return _scale2(_exp_poly(r), k)


@helper
def _log_mantissa(x):
    """x = m * 2**e with m in [sqrt(1/2), sqrt(2)]: returns log(m) (Cephes logf)."""
    xs = x * 8388608.0 if x < 1.17549435e-38 else x  # subnormals: scale by 2**23 first
    m = bitcast((bitcast(xs, i32) & 0x007FFFFF) | 0x3F800000, f32)
    f = (m * 0.5 if m > 1.41421356 else m) - 1.0
    z = f * f
    y = ((((((((7.0376836292e-2 * f - 1.1514610310e-1) * f + 1.1676998740e-1) * f
              - 1.2420140846e-1) * f + 1.4249322787e-1) * f - 1.6668057665e-1) * f
            + 2.0000714765e-1) * f - 2.4999993993e-1) * f + 3.3333331174e-1) * f * z
    return f + (y - 0.5 * z)


@helper
def _log_exponent(x):
    """The e of ``_log_mantissa``, as a float."""
    sub = x < 1.17549435e-38
    xs = x * 8388608.0 if sub else x
    b = bitcast(xs, i32)
    m = bitcast((b & 0x007FFFFF) | 0x3F800000, f32)
    e = (b >> 23) - (150 if sub else 127) + (1 if m > 1.41421356 else 0)
    return cast(e, f32)


@helper
def _log_special(x, r):
    """r for finite x > 0; C semantics elsewhere."""
    ok = x > 0.0 and x < _INF
    return r if ok else (-_INF if x == 0.0 else (x if x >= 0.0 else float("nan")))


@helper
def log_f32(x):
    e = _log_exponent(x)
    r = _log_mantissa(x) - 2.12194440e-4 * e + 0.693359375 * e
    return _log_special(x, r)


@helper
def log2_f32(x):
    r = _log_mantissa(x) * 1.44269504088896341 + _log_exponent(x)
    return _log_special(x, r)


@helper
def log1p_f32(x):
    """log(1 + x), accurate for small x: for |x| <= 0.5, 2 atanh(s) with s = x / (2 + x)
    (|s| <= 1/3) as its odd series to s**15, whose terms are all of one sign; beyond, log.

    No rounding trick: Goldberg's ``log(u) * x / (u - 1)`` with ``u = 1 + x`` relies on
    ``u - 1`` being computed as written, and Mesa's shader compilers (WebGPU on lavapipe,
    WebGL2 on llvmpipe) fold ``(1 + x) - 1`` to ``x``, which gave log(1 + 4.5e-5) 4e-4 off."""
    s = x / (2.0 + x)
    z = s * s
    series = (((((((z * 0.0666666667 + 0.0769230769) * z + 0.0909090909) * z + 0.111111111)
                 * z + 0.142857143) * z + 0.2) * z + 0.333333333) * z + 1.0) * (s + s)
    return log(1.0 + x) if (x > 0.5 or x < -0.5) else series


@helper
def expm1_f32(x):
    """exp(x) - 1, accurate for small x: for |x| <= 0.5 its Taylor series to x**10 / 10!
    (truncation below 1e-9 relative); beyond, exp(x) - 1 (no cancellation there)."""
    p = (x * 2.75573192e-7 + 2.48015873e-5) * x + 1.98412698e-4
    p = ((p * x + 1.38888889e-3) * x + 8.33333333e-3) * x + 4.16666667e-2
    series = (((p * x + 0.166666667) * x + 0.5) * x + 1.0) * x
    return exp(x) - 1.0 if (x > 0.5 or x < -0.5) else series


@helper
def _sin_poly(r):
    z = r * r
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r


@helper
def _cos_poly(r):
    z = r * r
    return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z
            + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0


@helper
def _quadrant(x):
    """x / (pi/2) rounded to the nearest integer, as a float."""
    return floor(x * 0.636619772367581343 + 0.5)


@helper
def _reduce(x, q):
    """x - q * pi/2 in three parts (each q * part exact for |q| < 2**13)."""
    return ((x - q * 1.5703125) - q * 4.837512969970703125e-4) - q * 7.54978995489188216e-8


@helper
def _unit(v):
    """v limited to [-1, 1]: where the reduction has lost all accuracy (|x| beyond ~1e6)."""
    return 1.0 if v > 1.0 else (-1.0 if v < -1.0 else v)


@helper
def sin_f32(x):
    q = _quadrant(x)
    r = _reduce(x, q)
    s = _sin_poly(r)
    c = _cos_poly(r)
    n = cast(q, i32) & 3
    v = s if n == 0 else (c if n == 1 else (-s if n == 2 else -c))
    return float("nan") if isinf(x) else _unit(v)


@helper
def cos_f32(x):
    q = _quadrant(x)
    r = _reduce(x, q)
    s = _sin_poly(r)
    c = _cos_poly(r)
    n = cast(q, i32) & 3
    v = c if n == 0 else (-s if n == 1 else (-c if n == 2 else s))
    return float("nan") if isinf(x) else _unit(v)


@helper
def tan_f32(x):
    q = _quadrant(x)
    r = _reduce(x, q)
    s = _sin_poly(r)
    c = _cos_poly(r)
    v = s / c if (cast(q, i32) & 1) == 0 else -c / s
    return float("nan") if isinf(x) else v


@helper
def _asin_core(a):
    """asin(a) for a in [0, 1] (Cephes asinf)."""
    big = a > 0.5
    z = 0.5 * (1.0 - a) if big else a * a
    s = sqrt(z) if big else a
    p = ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z
          + 7.4953002686e-2) * z + 1.6666752422e-1) * z * s + s
    return 1.57079632679489662 - (p + p) if big else p


@helper
def asin_f32(x):
    a = abs(x)
    r = _asin_core(a)
    return float("nan") if a > 1.0 else _copysign(r, x)


@helper
def acos_f32(x):
    a = abs(x)
    h = _asin_core(sqrt(0.5 * (1.0 - a)))  # asin(sqrt((1-|x|)/2)) = acos(|x|) / 2
    r = 2.0 * h if x > 0.5 else (3.14159265358979324 - 2.0 * h if x < -0.5
                                 else 1.57079632679489662 - asin_f32(x))
    return float("nan") if a > 1.0 else r


@helper
def _atan_pos(a):
    """atan(a) for a >= 0 (Cephes atanf)."""
    hi = a > 2.414213562373095
    mid = a > 0.4142135623730950
    y0 = 1.57079632679489662 if hi else (0.785398163397448310 if mid else 0.0)
    t = -1.0 / a if hi else ((a - 1.0) / (a + 1.0) if mid else a)
    z = t * t
    return y0 + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
                  - 3.33329491539e-1) * z * t + t)


@helper
def atan_f32(x):
    return _copysign(_atan_pos(abs(x)), x)


@helper
def atan2_f32(y, x):
    ax = abs(x)
    ay = abs(y)
    t = _atan_pos(ay / ax)
    both_inf = ax == _INF and ay == _INF
    t = 0.785398163397448310 if both_inf else (0.0 if ay == 0.0 and ax == 0.0 else t)
    r = 3.14159265358979324 - t if bitcast(x, i32) < 0 else t
    return x + y if (isnan(x) or isnan(y)) else _copysign(r, y)


@helper
def _exp_big(a):
    """e**a / 2 for a >= 9 without overflowing before the result does."""
    return exp(a - 0.693359375) * 1.00021221695


@helper
def sinh_f32(x):
    a = abs(x)
    z = a * a
    small = ((2.03721912945e-4 * z + 8.33028376239e-3) * z + 1.66667160211e-1) * z * a + a
    e = exp(a)
    r = small if a < 1.0 else (0.5 * e - 0.5 / e if a < 9.0 else _exp_big(a))
    return _copysign(r, x)


@helper
def cosh_f32(x):
    a = abs(x)
    e = exp(a)
    return 0.5 * e + 0.5 / e if a < 9.0 else _exp_big(a)


@helper
def tanh_f32(x):
    a = abs(x)
    z = a * a
    small = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
              + 1.33314422036e-1) * z - 3.33332819422e-1) * z * a + a
    r = small if a < 0.625 else 1.0 - 2.0 / (exp(a + a) + 1.0)
    return _copysign(r, x)


@helper
def asinh_f32(x):
    a = abs(x)
    small = log1p_f32(a + a * a / (1.0 + sqrt(1.0 + a * a)))
    r = log(a) + 0.693147180559945309 if a > 1e9 else small
    return _copysign(r, x)


@helper
def acosh_f32(x):
    t = x - 1.0
    r = log(x) + 0.693147180559945309 if x > 1e9 else log1p_f32(t + sqrt(t + t + t * t))
    return float("nan") if x < 1.0 else r


@helper
def atanh_f32(x):
    a = abs(x)
    return _copysign(0.5 * log1p_f32((a + a) / (1.0 - a)), x)


@helper
def pow_f32(x, y):
    ax = abs(x)
    r = exp2(y * log2(ax))
    yint = floor(y) == y  # false for nan, true for +-inf
    odd = yint and abs(y) < 16777216.0 and (cast(y, i32) & 1) == 1
    neg = bitcast(x, i32) < 0
    r = -r if neg and odd else r
    r = float("nan") if (x < 0.0 and x > -_INF and not yint) else r
    r = (float("nan") if neg and not yint else (-1.0 if neg and odd else 1.0)) if ax == 1.0 else r
    return 1.0 if y == 0.0 else r


@helper
def round_f16(x):
    """The float16 value nearest to f32 ``x`` (ties to even; beyond 65504 rounds to inf)."""
    b = bitcast(x, i32)
    a = b & 0x7FFFFFFF
    sign = b & -2147483648  # 0x80000000
    ax = bitcast(a, f32)
    normal = bitcast((a + 0xFFF + ((a >> 13) & 1)) & -8192, f32)  # drop 13 mantissa bits, RNE
    sub = (ax + 0.5) - 0.5  # multiples of 2**-24 (the f16 subnormal quantum), RNE
    r = sub if ax < 6.103515625e-05 else (normal if ax < 65520.0 else _INF)
    return x if isnan(x) else bitcast(bitcast(r, i32) | sign, f32)


@helper
def bf16_bits(x):
    """The 16 bits of the bfloat16 nearest to f32 ``x`` (ties to even, as ml_dtypes rounds;
    beyond the largest bfloat16 rounds to inf), in an i32; NaN stays a quiet NaN."""
    b = bitcast(x, u32)
    nearest = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return cast(((b >> 16) | 0x40) if isnan(x) else nearest, i32)


@helper
def round_bf16(x):
    """The bfloat16 value nearest to f32 ``x`` (ties to even), as an f32."""
    return bitcast(cast(bf16_bits(x), u32) << 16, f32)


# fmt: on

for _name, _fn in {
    "exp": exp_f32, "exp2": exp2_f32, "log": log_f32, "log2": log2_f32,
    "sin": sin_f32, "cos": cos_f32, "tan": tan_f32, "asin": asin_f32, "acos": acos_f32,
    "atan": atan_f32, "atan2": atan2_f32, "sinh": sinh_f32, "cosh": cosh_f32,
    "tanh": tanh_f32, "asinh": asinh_f32, "acosh": acosh_f32, "atanh": atanh_f32,
    "pow": pow_f32, "round_f16": round_f16, "bf16_bits": bf16_bits, "round_bf16": round_bf16,
}.items():
    register_polyfill(_name, "float", _fn)
