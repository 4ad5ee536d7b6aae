"""The kernels of the kernel suite: one per language feature or operator family."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math

from spawnml.kernel import (
    Output,
    Tensor,
    cast,
    f32,
    helper,
    i32,
    kernel,
    static_range,
)
from spawnml.kernel.lib import broadcast_offset
from spawnml.kernel.polyfills_math import expm1_f32, log1p_f32


@kernel
def add_broadcast(a: Tensor, b: Tensor, out: Output):
    return a.flat[broadcast_offset(a, out)] + b.flat[broadcast_offset(b, out)]


@kernel
def binary(a: Tensor, b: Tensor, out: Output, op: int):
    x = a.flat[broadcast_offset(a, out)]
    y = b.flat[broadcast_offset(b, out)]
    if op == 0:
        return x * y
    elif op == 1:
        return x - y
    elif op == 2:
        return x / y
    elif op == 3:
        return min(x, y)
    elif op == 4:
        return max(x, y)
    elif op == 5:
        return pow(x, y)
    elif op == 6:
        return atan2(x, y)
    elif op == 7:
        return x // y
    elif op == 8:
        return x % y
    return fmod(x, y)


@kernel
def int_binary(a: Tensor, b: Tensor, out: Output, op: int):
    x = a.flat[out.flat]
    y = b.flat[out.flat]
    if op == 0:
        return x // y
    elif op == 1:
        return x % y
    elif op == 2:
        return truncdiv(x, y)
    elif op == 3:
        return truncmod(x, y)
    elif op == 4:
        return (x & y) | (x ^ 7)
    elif op == 5:
        return (x << 3) >> 1
    elif op == 6:
        return ~x
    elif op == 7:
        return abs(x) + sign(y)
    return min(x, y) * 3 - max(x, y)


@kernel
def unary(x: Tensor, out: Output, op: int):
    v = x.flat[out.flat]
    if op == 0:
        return exp(v)
    elif op == 1:
        return log(v)
    elif op == 2:
        return sqrt(v)
    elif op == 3:
        return rsqrt(v)
    elif op == 4:
        return sin(v)
    elif op == 5:
        return cos(v)
    elif op == 6:
        return tan(v)
    elif op == 7:
        return tanh(v)
    elif op == 8:
        return erf(v)
    elif op == 9:
        return floor(v)
    elif op == 10:
        return ceil(v)
    elif op == 11:
        return round(v)
    elif op == 12:
        return sign(v)
    elif op == 13:
        return abs(v)
    elif op == 14:
        return trunc(v)
    elif op == 15:
        return asin(v)
    elif op == 16:
        return acos(v)
    elif op == 17:
        return atan(v)
    elif op == 18:
        return sinh(v)
    elif op == 19:
        return cosh(v)
    elif op == 20:
        return asinh(v)
    elif op == 21:
        return acosh(v)
    elif op == 22:
        return atanh(v)
    elif op == 23:
        return exp2(v)
    elif op == 24:
        return log2(v)
    return -v


@kernel
def relu(x: Tensor, out: Output):
    return max(x.flat[out.flat], 0.0)


@kernel
def leaky_relu(x: Tensor, out: Output, alpha: float = 0.01):
    v = x.flat[out.flat]
    if v >= 0.0:
        return v
    return v * alpha


@kernel
def sigmoid(x: Tensor, out: Output):
    return 1.0 / (1.0 + exp(-x.flat[out.flat]))


@kernel
def log1p(x: Tensor, out: Output):
    return log1p_f32(x.flat[out.flat])


@kernel
def expm1(x: Tensor, out: Output):
    return expm1_f32(x.flat[out.flat])


@kernel
def one_plus_tanh(x: Tensor, out: Output):
    return 1.0 + tanh(x.flat[out.flat])


@kernel
def gelu_tanh(x: Tensor, out: Output):
    v = x.flat[out.flat]
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v**3)))


@kernel
def gelu_erf(x: Tensor, out: Output):
    v = x.flat[out.flat]
    return 0.5 * v * (1.0 + erf(v * 0.7071067811865476))


@kernel
def hard_swish_piecewise(x: Tensor, out: Output):
    v = x.flat[out.flat]
    if v <= -3.0:
        r = 0.0
    elif v >= 3.0:
        r = v
    else:
        r = v * (v + 3.0) / 6.0
    return r


@kernel
def clip(x: Tensor, out: Output, lo: float, hi: float):
    return min(max(x.flat[out.flat], lo), hi)


@kernel
def where(c: Tensor, a: Tensor, b: Tensor, out: Output):
    return (
        a.flat[broadcast_offset(a, out)]
        if c.flat[broadcast_offset(c, out)]
        else b.flat[broadcast_offset(b, out)]
    )


@kernel
def special_values(x: Tensor, out: Output):
    v = x.flat[out.flat]
    if v > 100.0:
        return math.inf
    if v < -100.0:
        return -math.inf
    if isnan(v):
        return 7.0
    return float("nan") if v == 0.0 else v


@kernel
def is_nan_or_inf(x: Tensor, out: Output, which: int):
    v = x.flat[out.flat]
    if which == 0:
        return isnan(v)
    if which == 1:
        return isinf(v)
    return isfinite(v)


@kernel
def nan_minmax(a: Tensor, b: Tensor, out: Output):
    return min(a.flat[out.flat], b.flat[out.flat]) + max(a.flat[out.flat], b.flat[out.flat])


@kernel
def convert(x: Tensor, out: Output):
    return cast(x.flat[out.flat], out.dtype)


@kernel
def bool_logic(a: Tensor, b: Tensor, out: Output):
    p = a.flat[out.flat]
    q = b.flat[out.flat]
    return (p and not q) or (q ^ (p or q)) if out.flat % 2 == 0 else not (p and q)


@kernel
def in_range(x: Tensor, out: Output, lo: float, hi: float):
    return lo <= x.flat[out.flat] < hi


@kernel
def fma_f16(a: Tensor, b: Tensor, c: Tensor, out: Output):
    return a.flat[out.flat] * b.flat[out.flat] + c.flat[out.flat]


@kernel
def wrap_u32(a: Tensor, out: Output):
    v = a.flat[out.flat]
    return v * 2654435761 + 12345


@kernel
def add_i64(a: Tensor, b: Tensor, out: Output):
    return a.flat[out.flat] + b.flat[out.flat] * 3


@kernel
def reduce(x: Tensor, out: Output, axis: int, op: int):
    """op 0 sum, 1 max, 2 min, 3 mean, 4 prod, 5 sum of squares."""
    n = x.shape[axis]
    base = 0
    for d in static_range(out.ndim):
        xd = d if d < axis else d + 1
        base = base + out.index[d] * x.strides[xd]
    step = x.strides[axis]
    if op == 1:
        acc = -math.inf
        for k in range(n):
            acc = max(acc, x.flat[base + k * step])
        return acc
    if op == 2:
        acc = math.inf
        for k in range(n):
            acc = min(acc, x.flat[base + k * step])
        return acc
    if op == 4:
        acc = 1.0
        for k in range(n):
            acc = acc * x.flat[base + k * step]
        return acc
    acc = 0.0
    for k in range(n):
        v = x.flat[base + k * step]
        acc += v * v if op == 5 else v
    return acc / n if op == 3 else acc


@kernel
def argmax(x: Tensor, out: Output):
    row = out.index[0]
    best = x[row, 0]
    best_i = 0
    for k in range(1, x.shape[1]):
        v = x[row, k]
        if v > best:
            best = v
            best_i = k
    return best_i


@kernel
def softmax_fused(x: Tensor, out: Output):
    r, c = out.index
    m = -math.inf
    for k in range(x.shape[1]):
        m = max(m, x[r, k])
    s = 0.0
    for k in range(x.shape[1]):
        s += exp(x[r, k] - m)
    return exp(x[r, c] - m) / s


@kernel
def softmax_stats(x: Tensor, out: Output):
    """out[r, 0] = row max, out[r, 1] = sum(exp(x - max))."""
    r, which = out.index
    m = -math.inf
    for k in range(x.shape[1]):
        m = max(m, x[r, k])
    if which == 0:
        return m
    s = 0.0
    for k in range(x.shape[1]):
        s += exp(x[r, k] - m)
    return s


@kernel
def softmax_apply(x: Tensor, stats: Tensor, out: Output):
    r, c = out.index
    return exp(x[r, c] - stats[r, 0]) / stats[r, 1]


@kernel
def conv2d(
    x: Tensor,
    w: Tensor,
    bias: Tensor,
    out: Output,
    stride: tuple,
    pad: tuple,
    dilation: tuple,
    groups: int,
):
    n, co, oy, ox = out.index
    cin_g = w.shape[1]
    cout_g = out.shape[1] // groups
    g = co // cout_g
    acc = bias[co]
    for ci in range(cin_g):
        for ky in range(w.shape[2]):
            iy = oy * stride[0] - pad[0] + ky * dilation[0]
            for kx in range(w.shape[3]):
                ix = ox * stride[1] - pad[1] + kx * dilation[1]
                if 0 <= iy < x.shape[2] and 0 <= ix < x.shape[3]:
                    acc += x[n, g * cin_g + ci, iy, ix] * w[co, ci, ky, kx]
    return acc


@kernel
def max_pool2d(
    x: Tensor, out: Output, kernel_shape: tuple, stride: tuple, pad: tuple, dilation: tuple
):
    n, c, oy, ox = out.index
    acc = -math.inf
    for ky in range(kernel_shape[0]):
        iy = oy * stride[0] - pad[0] + ky * dilation[0]
        for kx in range(kernel_shape[1]):
            ix = ox * stride[1] - pad[1] + kx * dilation[1]
            if 0 <= iy < x.shape[2] and 0 <= ix < x.shape[3]:
                acc = max(acc, x[n, c, iy, ix])
    return acc


@kernel
def avg_pool2d(
    x: Tensor, out: Output, kernel_shape: tuple, stride: tuple, pad: tuple, count_include_pad: bool
):
    n, c, oy, ox = out.index
    y0 = oy * stride[0] - pad[0]
    x0 = ox * stride[1] - pad[1]
    y_lo = max(y0, 0)
    y_hi = min(y0 + kernel_shape[0], x.shape[2])
    x_lo = max(x0, 0)
    x_hi = min(x0 + kernel_shape[1], x.shape[3])
    acc = 0.0
    for iy in range(y_lo, y_hi):
        for ix in range(x_lo, x_hi):
            acc += x[n, c, iy, ix]
    if count_include_pad:
        ye = min(y0 + kernel_shape[0], x.shape[2] + pad[0])
        xe = min(x0 + kernel_shape[1], x.shape[3] + pad[1])
        count = (ye - y0) * (xe - x0)
    else:
        count = (y_hi - y_lo) * (x_hi - x_lo)
    return acc / cast(count, f32)


@kernel
def global_avg_pool(x: Tensor, out: Output):
    n, c, _, _ = out.index
    acc = 0.0
    for iy in range(x.shape[2]):
        for ix in range(x.shape[3]):
            acc += x[n, c, iy, ix]
    return acc / (x.shape[2] * x.shape[3])


@kernel
def matmul(a: Tensor, b: Tensor, out: Output):
    bt, i, j = out.index
    acc = 0.0
    for k in range(a.shape[2]):
        acc += a[bt, i, k] * b[bt, k, j]
    return acc


@kernel
def transpose(x: Tensor, out: Output, perm: tuple):
    off = 0
    for d in static_range(out.ndim):
        off = off + out.index[d] * x.strides[perm[d]]
    return x.flat[off]


@kernel
def gather(data: Tensor, indices: Tensor, out: Output, axis: int):
    """ONNX Gather: out[pre, idx..., post] = data[pre, indices[idx...], post]."""
    q = indices.ndim
    off = 0
    for d in static_range(axis):
        off = off + out.index[d] * data.strides[d]
    iflat = 0
    for d in static_range(q):
        iflat = iflat + out.index[axis + d] * indices.strides[d]
    i = cast(indices.flat[iflat], i32)
    i = i + data.shape[axis] if i < 0 else i
    off = off + i * data.strides[axis]
    for d in static_range(axis + 1, data.ndim):
        off = off + out.index[d + q - 1] * data.strides[d]
    return data.flat[off]


@kernel
def concat3(a: Tensor, b: Tensor, c: Tensor, out: Output, axis: int):
    i = out.index[axis]
    src = 0
    for d in static_range(out.ndim):
        if d != axis:
            src = src + out.index[d] * a.strides[d]
    if i < a.shape[axis]:
        return a.flat[src + i * a.strides[axis]]
    i -= a.shape[axis]
    src_b = 0
    for d in static_range(out.ndim):
        if d != axis:
            src_b = src_b + out.index[d] * b.strides[d]
    if i < b.shape[axis]:
        return b.flat[src_b + i * b.strides[axis]]
    i -= b.shape[axis]
    src_c = 0
    for d in static_range(out.ndim):
        if d != axis:
            src_c = src_c + out.index[d] * c.strides[d]
    return c.flat[src_c + i * c.strides[axis]]


@kernel
def slice_steps(x: Tensor, out: Output, starts: tuple, steps: tuple):
    off = 0
    for d in static_range(out.ndim):
        off = off + (starts[d] + out.index[d] * steps[d]) * x.strides[d]
    return x.flat[off]


@kernel
def pad_reflect(x: Tensor, out: Output, pads: tuple):
    off = 0
    for d in static_range(out.ndim):
        i = out.index[d] - pads[d]
        n = x.shape[d]
        i = -i if i < 0 else i
        i = 2 * (n - 1) - i if i >= n else i
        off = off + i * x.strides[d]
    return x.flat[off]


@kernel
def copy(x: Tensor, out: Output):
    return x.flat[out.flat]


@kernel
def first_above(x: Tensor, out: Output, threshold: float):
    """Index of the first element above ``threshold`` in each row, or -1 (early return)."""
    row = out.index[0]
    for k in range(x.shape[1]):
        if x[row, k] > threshold:
            return k
    return -1


@kernel
def cumsum_rows(x: Tensor, out: Output, exclusive: bool):
    r, c = out.index
    acc = 0.0
    stop = c if exclusive else c + 1
    for k in range(stop):
        acc += x[r, k]
    return acc


@kernel
def reverse_loop(x: Tensor, out: Output):
    """Sum x[r, c:] walking backwards with a negative step."""
    r, c = out.index
    acc = 0.0
    for k in range(x.shape[1] - 1, c - 1, -1):
        acc += x[r, k] * cast(k + 1, f32)
    return acc


@helper
def horner(v, coeffs):
    acc = v * 0.0
    for i in static_range(len(coeffs)):
        acc = acc * v + coeffs[i]
    return acc


@kernel
def polynomial(x: Tensor, out: Output, coeffs: tuple):
    return horner(x.flat[out.flat], coeffs)


@kernel
def guarded_neighbours(x: Tensor, out: Output):
    """Masked-out lanes compute out-of-bounds indices that must never be read."""
    i = out.flat
    left = x.flat[i - 1] if i > 0 else 0.0
    right = x.flat[i + 1] if i + 1 < x.size else 0.0
    return left + right


@kernel
def padded_taps(x: Tensor, w: Tensor, out: Output, fill: float):
    """A reduction whose temporary is set under a data-dependent condition: lanes outside
    the condition keep the value set before it (a padded tap is ``fill`` times the weight)."""
    i = out.flat
    acc = 0.0
    for k in range(w.size):
        v = fill
        j = i + k - 1
        if 0 <= j < x.size:
            v = x.flat[j]
        acc += v * w.flat[k]
    return acc


@kernel
def index_math(x: Tensor, out: Output):
    """Integer index arithmetic with negative intermediate values."""
    i = cast(x.flat[out.flat], i32)
    return (i - 7) // 3 * 10 + (i - 7) % 3 + (-i) // 4


@kernel
def window_sum_of_squares(x: Tensor, out: Output, size: int):
    """Sum of squares over a window of ``size`` channels (axis 1) centred on the output's:
    the window test becomes an interior version, and a temporary written in the interior
    version is written again in the border version's loop."""
    c = out.index[1]
    lo = c - (size - 1) // 2
    acc = 0.0
    for k in range(size):
        ck = lo + k
        if 0 <= ck < x.shape[1]:
            v = x.flat[out.flat + (ck - c) * x.strides[1]]
            acc = acc + v * v
    return acc
