"""Kernels of scaled dot-product attention (Attention, FlexAttention).

Every operand is addressed through four strides over the logical axes (batch, head,
sequence, feature), so 3-D inputs (``(B, S, H * E)``) are read in place, without a
transpose launch. A query head ``h`` reads key/value head ``h // group`` (grouped-query
attention repeats each KV head ``group`` times, interleaved as ``np.repeat``).

The launches: ``attn_scores`` (scaled, soft-capped Q.K into a float32 temporary),
``attn_row_stats`` (per query row: the softmax maximum and sum, with the sum forced to 0
for a row whose additive bias is entirely -inf), ``attn_probs`` (normalised
probabilities) and ``attn_output`` (probabilities times V). The additive bias (attention
mask, causal and sliding-window frontiers, key padding) is recomputed by the
``attn_bias`` helper wherever it is needed instead of being materialised.
"""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math

from spawnml.kernel import Output, Tensor, cast, f16, f32, helper, i32, kernel

MASK_NONE, MASK_BOOL, MASK_FLOAT = 0, 1, 2


@helper
def round_to(v, half):
    """``v`` rounded to float16 and back when ``half`` (the reference computes in the input
    type: this reproduces its float16 roundings)."""
    if half:
        return cast(cast(v, f16), f32)
    else:
        return v


@helper
def attn_bias(mask, nonpad, b, h, i, j, mask_mode, m_st, m_len, has_nonpad, causal,
              past_len, q_len, left, right):
    """The additive bias of score (b, h, i, j): the mask value (0 for an allowed key of a
    bool mask), or -inf where a mask, the causal or window frontier, or padding excludes
    the key. Frontiers are offset-aligned: query i sits at position i + offset."""
    ok = j >= 0
    v = 0.0
    if mask_mode != 0:
        if j < m_len:
            off = b * m_st[0] + h * m_st[1] + i * m_st[2] + j * m_st[3]
            if mask_mode == 1:
                ok = mask.flat[off]
            else:
                v = cast(mask.flat[off], f32)
        else:
            ok = False  # keys beyond a short mask are padded with -inf / False
    pos = i + past_len
    if has_nonpad:
        n = cast(nonpad.flat[b], i32)
        ok = ok and j < n
        pos = i + n - q_len
    if causal:
        ok = ok and j <= pos
    if left >= 0:
        ok = ok and pos - j <= left
    if right >= 0:
        ok = ok and j - pos <= right
    return v if ok else -math.inf


@kernel
def attn_scores(
    q: Tensor, k: Tensor, out: Output, q_st: tuple, k_st: tuple, group: int, head: int,
    scale_sqrt: float, softcap: float, half: bool,
):
    """out[b, h, i, j] = (q * sqrt(scale)) . (k * sqrt(scale)), soft-capped if > 0."""
    b = out.index[0]
    h = out.index[1]
    qb = b * q_st[0] + h * q_st[1] + out.index[2] * q_st[2]
    kb = b * k_st[0] + (h // group) * k_st[1] + out.index[3] * k_st[2]
    acc = 0.0
    for e in range(head):
        qv = round_to(cast(q.flat[qb + e * q_st[3]], f32) * scale_sqrt, half)
        kv = round_to(cast(k.flat[kb + e * k_st[3]], f32) * scale_sqrt, half)
        acc = acc + qv * kv
    s = round_to(acc, half)
    if softcap > 0.0:
        s = round_to(tanh(s / softcap) * softcap, half)
    return s


@kernel
def attn_row_stats(
    s: Tensor, mask: Tensor, nonpad: Tensor, out: Output, mask_mode: int, m_st: tuple,
    m_len: int, has_nonpad: bool, causal: bool, past_len: int, left: int, right: int,
    half: bool, half_sm: bool,
):
    """out[b, h, i, 0] = the row maximum of scores + bias (0 when it is -inf), and
    out[b, h, i, 1] = sum(exp(x - max)), or 0 when the bias masks every key. ``half``
    rounds the logits to float16, ``half_sm`` the softmax terms too (a float16 softmax)."""
    b = out.index[0]
    h = out.index[1]
    i = out.index[2]
    n = s.shape[3]
    base = ((b * s.shape[1] + h) * s.shape[2] + i) * n
    q_len = s.shape[2]
    m = -math.inf
    bm = -math.inf
    for j in range(n):
        bias = attn_bias(mask, nonpad, b, h, i, j, mask_mode, m_st, m_len, has_nonpad, causal,
                         past_len, q_len, left, right)
        m = max(m, round_to(s.flat[base + j] + bias, half))
        bm = max(bm, bias)
    safe = 0.0 if m == -math.inf else m
    t = 0.0
    for j in range(n):
        bias = attn_bias(mask, nonpad, b, h, i, j, mask_mode, m_st, m_len, has_nonpad, causal,
                         past_len, q_len, left, right)
        t = t + round_to(exp(round_to(s.flat[base + j] + bias, half) - safe), half_sm)
    t = 0.0 if bm == -math.inf else round_to(t, half_sm)
    return safe if out.index[3] == 0 else t


@kernel
def attn_probs(
    s: Tensor, stats: Tensor, mask: Tensor, nonpad: Tensor, out: Output, mask_mode: int,
    m_st: tuple, m_len: int, has_nonpad: bool, causal: bool, past_len: int, left: int,
    right: int, mode: int, half: bool, half_sm: bool,
):
    """Softmax probabilities (mode 0); mode 1: scores + bias; mode 2: the scores alone."""
    b = out.index[0]
    h = out.index[1]
    i = out.index[2]
    j = out.index[3]
    row = out.flat // s.shape[3]
    v = s.flat[out.flat]
    if mode == 2:
        return cast(v, out.dtype)
    bias = attn_bias(mask, nonpad, b, h, i, j, mask_mode, m_st, m_len, has_nonpad, causal,
                     past_len, s.shape[2], left, right)
    x = round_to(v + bias, half)
    if mode == 1:
        return cast(x, out.dtype)
    t = stats.flat[row * 2 + 1]
    p = 0.0 if t == 0.0 else round_to(exp(x - stats.flat[row * 2]), half_sm) / t
    return cast(p, out.dtype)


@kernel
def attn_output(
    p: Tensor, v: Tensor, out: Output, v_st: tuple, group: int, heads: int, v_head: int,
):
    """Y[b, h, i, d] = sum_j P[b, h, i, j] * V[b, h // group, j, d]; a rank-3 output is
    (B, S, H * Dv)."""
    b = out.index[0]
    h = 0
    i = 0
    d = 0
    if out.ndim == 4:
        h = out.index[1]
        i = out.index[2]
        d = out.index[3]
    else:
        i = out.index[1]
        h = out.index[2] // v_head
        d = out.index[2] % v_head
    n = p.shape[3]
    pb = ((b * heads + h) * p.shape[2] + i) * n
    vb = b * v_st[0] + (h // group) * v_st[1] + d * v_st[3]
    acc = 0.0
    for j in range(n):
        acc = acc + cast(p.flat[pb + j], f32) * cast(v.flat[vb + j * v_st[2]], f32)
    return cast(acc, out.dtype)


@kernel
def kv_concat(past: Tensor, x: Tensor, out: Output, x_st: tuple, past_len: int):
    """present[b, h, s, e] = past[b, h, s, e] for s < past_len, else x at s - past_len
    (x addressed by strides, so a 3-D input is read as (B, H, S, E))."""
    b, h, s, e = out.index
    if past_len > 0:
        if s < past_len:
            return past[b, h, s, e]
    return x.flat[b * x_st[0] + h * x_st[1] + (s - past_len) * x_st[2] + e * x_st[3]]
