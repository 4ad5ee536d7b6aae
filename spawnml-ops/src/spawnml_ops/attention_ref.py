"""numpy references of the attention ops (the truth the device lowerings are checked
against). Like ONNX's reference they compute in the input type, so float16 results carry
the same roundings."""

from __future__ import annotations

import numpy as np


def _to4d(x: np.ndarray, heads: int | None) -> np.ndarray:
    """(B, S, H * E) -> (B, H, S, E); rank-4 tensors pass through."""
    if x.ndim == 4:
        return x
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)  # type: ignore[operator]


def attention_bias(
    shape: tuple[int, int, int, int], dtype: np.dtype, mask: np.ndarray | None,
    nonpad: np.ndarray | None, *, causal: bool, past: int, left: int, right: int,
) -> np.ndarray:
    """The additive bias, broadcastable to (B, H, Sq, Skv): mask values (0 for allowed keys
    of a bool mask), -inf where a mask, causal/window frontier or padding excludes a key."""
    b, _, sq, skv = shape
    allowed = np.ones((1, 1, sq, skv), bool)
    value = np.zeros((1, 1, sq, skv), dtype)
    if mask is not None:
        pad = skv - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
        if mask.dtype == np.bool_:
            allowed = allowed & mask
        else:
            value = value + mask.astype(dtype)
    i = np.arange(sq).reshape(sq, 1)
    j = np.arange(skv).reshape(1, skv)
    pos = i + past
    if nonpad is not None:
        n = np.asarray(nonpad, np.int64).reshape(b, 1, 1, 1)
        allowed = allowed & (j < n)
        pos = i + n - sq
    if causal:
        allowed = allowed & (j <= pos)
    if left >= 0:
        allowed = allowed & (pos - j <= left)
    if right >= 0:
        allowed = allowed & (j - pos <= right)
    return np.where(allowed, value, dtype.type(-np.inf))


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; an all -inf row gives zeros."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), x.dtype.type(0), m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, x.dtype.type(1), s)


def attention_reference(
    q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, *, scale=None, causal=False,
    softcap=0.0, mode=0, left=-1, right=-1, q_heads=None, kv_heads=None, f32_softmax=False,
) -> list[np.ndarray]:
    """[Y, present_key, present_value, qk_matmul_output] of ONNX Attention."""
    dtype = q.dtype
    rank = q.ndim
    q, k, v = _to4d(q, q_heads), _to4d(k, kv_heads), _to4d(v, kv_heads)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[3])
    ss = dtype.type(np.sqrt(scale))
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    with np.errstate(all="ignore"):
        bias = attention_bias(shape, dtype, mask, nonpad, causal=causal, past=past, left=left,
                              right=right)
        group = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        # numpy promotes bfloat16 products to float32: round back as ONNX's reference does
        s = np.matmul(q * ss, np.swapaxes(k * ss, -1, -2)).astype(dtype)
        if softcap > 0:
            s = np.tanh(s / dtype.type(softcap)) * dtype.type(softcap)
        x = s + bias
        p = softmax_rows(x.astype(np.float32) if f32_softmax else x)
        p = np.where(np.isneginf(np.max(bias, axis=-1, keepdims=True)), 0, p).astype(dtype)
        y = np.matmul(p, v).astype(dtype)
    qk = p if mode == 3 else x if mode == 2 else s
    if rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return [y.astype(dtype), present_k, present_v,
            np.broadcast_to(qk, shape).astype(dtype)]


def flex_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: float) -> np.ndarray:
    """FlexAttention without score/prob graphs: scores in the input type, softmax and the
    weighted sum in float32 for float16 inputs."""
    ss = np.array(np.sqrt(np.float32(scale)), dtype=q.dtype)
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.matmul(q * ss, np.swapaxes(k * ss, -1, -2))
    work = np.float32 if q.dtype.itemsize < 4 else q.dtype
    p = softmax_rows(s.astype(work))
    return np.matmul(p, v.astype(work)).astype(v.dtype)
