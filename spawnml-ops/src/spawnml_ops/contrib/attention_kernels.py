"""Small kernels the com.microsoft attention ops add around the shared attention launches
(``attention_plan``): splitting packed QKV, GroupQueryAttention's per-batch lengths and its
KV-cache write, and MultiHeadAttention's bias add and combined mask."""


from __future__ import annotations

from spawnml.kernel import Output, Tensor, cast, f32, i32, kernel, static_range


@kernel
def slice_last(x: Tensor, out: Output, offset: int):
    """out[..., c] = x[..., offset + c]: one of Q, K, V from a packed QKV tensor."""
    n = out.shape[out.ndim - 1]
    row = out.flat // n
    return x.flat[row * x.shape[x.ndim - 1] + offset + out.flat % n]


@kernel
def add_bias_slice(x: Tensor, bias: Tensor, out: Output, offset: int):
    """out = x + bias[offset + last index] (MultiHeadAttention's input-projection bias)."""
    c = out.index[out.ndim - 1]
    return cast(cast(x.flat[out.flat], f32) + cast(bias.flat[offset + c], f32), out.dtype)


@kernel
def gqa_lengths(seqlens: Tensor, total: Tensor, out: Output, seq: int):
    """Per batch entry, the number of keys after this step: seqlens_k + 1, or the sequence
    length in a first prompt (sequence length == total_sequence_length), where the whole
    padded chunk is written at position 0."""
    if cast(total.flat[0], i32) == seq:
        return seq
    return cast(seqlens.flat[out.index[0]], i32) + 1


@kernel
def gqa_cache(past: Tensor, new: Tensor, lens: Tensor, out: Output, new_st: tuple, seq: int,
              has_past: bool):
    """present[b, h, t, d]: the past cache below the new rows' start (lens[b] - seq), the new
    rows (read through strides from the (B, S, H * D) input), zero beyond them."""
    b, h, t, d = out.index
    start = lens.flat[b] - seq
    if has_past:
        if t < start and t < past.shape[2]:
            return past[b, h, t, d]
    if start <= t < start + seq:
        return new.flat[b * new_st[0] + h * new_st[1] + (t - start) * new_st[2] + d * new_st[3]]
    return cast(0.0, out.dtype)


@kernel
def mha_mask(pad: Tensor, bias: Tensor, out: Output, has_pad: bool, has_bias: bool,
             pad_st: tuple, filter_value: float):
    """An additive (B, H or 1, S, T) mask: the attention bias (broadcast) plus
    ``filter_value`` where the key padding mask (B, T), (B, S, T) is 0, or where the key lies
    beyond a (B,) length."""
    b = out.index[0]
    i = out.index[2]
    j = out.index[3]
    v = 0.0
    if has_bias:
        off = 0
        for d in static_range(4):
            if bias.shape[d] != 1:
                off = off + out.index[d] * bias.strides[d]
        v = cast(bias.flat[off], f32)
    if has_pad:
        if pad.ndim == 1:
            if j >= cast(pad.flat[b], i32):
                v = v + filter_value
        elif cast(pad.flat[b * pad_st[0] + i * pad_st[1] + j], i32) == 0:
            v = v + filter_value
    return v
