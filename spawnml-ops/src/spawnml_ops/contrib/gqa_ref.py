"""numpy reference of com.microsoft GroupQueryAttention, following onnxruntime's CPU kernel:
per batch entry b the cache holds T = seqlens_k[b] + 1 keys after the step; the new rows
go to positions [T - S, T), or [0, S) in a first prompt (S == total_sequence_length);
query row i sits at position T - S + i (i in a first prompt) and attends causally, to its last
``local_window_size`` keys (itself included) when it is set."""

from __future__ import annotations

import numpy as np

from ..attention_ref import softmax_rows
from .rotary import rotate_reference


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, S, H * D) -> (B, H, S, D)."""
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def gqa_positions(seqlens: np.ndarray, total: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
    """(lengths (B,), positions (B, S)): the keys held after the step per batch entry, and
    each query row's position (padding rows of a first prompt at 1, as onnxruntime)."""
    t = seqlens.astype(np.int64) + 1
    s = np.arange(seq)
    if total == seq:
        return np.full_like(t, seq), np.where(s[None, :] < t[:, None], s[None, :], 1)
    return t, t[:, None] - seq + s[None, :]


def gqa_reference(q, k, v, past_k, past_v, seqlens, total, cos, sin, bias, *, heads: int,
                  kv_heads: int, scale: float | None, softcap: float, window: int,
                  causal: bool, rotary: bool, interleaved: bool) -> list[np.ndarray]:
    """[output, present_key, present_value] in the input dtype (computed in float32)."""
    dtype = q.dtype
    b, seq, _ = q.shape
    f = np.float32
    if k is None:  # packed QKV
        d = q.shape[2] // (heads + 2 * kv_heads)
        q, k, v = np.split(q, [heads * d, (heads + kv_heads) * d], axis=2)
    d = q.shape[2] // heads
    lens, pos = gqa_positions(seqlens, total, seq)
    if rotary:
        rot = cos.shape[1] * 2
        q = rotate_reference(q, cos, sin, pos, heads, rot, interleaved)
        k = rotate_reference(k, cos, sin, pos, kv_heads, rot, interleaved)
    past = 0 if past_k is None else past_k.shape[2]
    length = max(total, past)
    present = [np.zeros((b, kv_heads, length, d), dtype) for _ in range(2)]
    for x, old, new in ((present[0], past_k, k), (present[1], past_v, v)):
        for i in range(b):
            start = int(lens[i]) - seq
            if old is not None:
                x[i, :, :start] = old[i, :, :start]
            x[i, :, start:start + seq] = _heads(new, kv_heads)[i]
    group = heads // kv_heads
    kk = np.repeat(present[0].astype(f), group, axis=1)
    vv = np.repeat(present[1].astype(f), group, axis=1)
    alpha = f(1.0 / np.sqrt(d)) if not scale else f(scale)
    with np.errstate(all="ignore"):
        s = np.matmul(_heads(q, heads).astype(f), np.swapaxes(kk, -1, -2)) * alpha
        if softcap > 0:
            s = np.tanh(s / f(softcap)) * f(softcap)
        if bias is not None:
            s = s + np.pad(bias.astype(f), [(0, 0)] * 3 + [(0, length - bias.shape[-1])])
        row = lens[:, None, None, None] - seq + np.arange(seq)[None, None, :, None]
        j = np.arange(length)[None, None, None, :]
        ok = j < lens[:, None, None, None]
        if causal:
            ok = ok & (j <= row)
        if window >= 0:
            ok = ok & (row - j < window)
        p = softmax_rows(np.where(ok, s, -np.inf))
        y = np.matmul(p, vv)
    y = y.transpose(0, 2, 1, 3).reshape(b, seq, heads * d)
    return [y.astype(dtype), present[0], present[1]]
