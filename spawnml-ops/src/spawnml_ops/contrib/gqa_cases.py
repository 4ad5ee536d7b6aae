"""Conformance cases of GroupQueryAttention: prompt and decode steps, past-length and
shared max-length caches, packed QKV, rotary (plain and interleaved), local windows,
softcap, attention bias, subsequent prompts and float16."""

from __future__ import annotations

import numpy as np

from spawnml.op import OpCase

from .common import rand


def _i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def _caches(seed: int, length: int, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    angles = rand(seed, length, d // 2)
    return np.cos(angles), np.sin(angles)


def gqa_cases() -> list[OpCase]:
    b, s, hq, hkv, d = 2, 5, 4, 2, 16  # onnxruntime rotates heads of 16k only
    heads = {"num_heads": hq, "kv_num_heads": hkv}
    q, k, v = rand(0, b, s, hq * d), rand(1, b, s, hkv * d), rand(2, b, s, hkv * d)
    q1, k1, v1 = q[:, :1], k[:, :1], v[:, :1]
    past_k, past_v = rand(3, b, hkv, 4, d), rand(4, b, hkv, 4, d)
    shared_k, shared_v = rand(5, b, hkv, 8, d), rand(6, b, hkv, 8, d)
    cos, sin = _caches(7, 16)
    packed = np.concatenate([q, k, v], axis=2)
    bias = rand(9, b, 1, s, 5)
    tol = dict(rtol=1e-4, atol=1e-5)
    rotary = {"do_rotary": 1}
    return [
        OpCase("prompt", [q, k, v, None, None, _i32(4, 4), _i32(5)], heads, n_outputs=3,
               **tol),
        OpCase("decode_past", [q1, k1, v1, past_k, past_v, _i32(4, 4), _i32(5)], heads,
               n_outputs=3, **tol),
        OpCase("decode_shared_buffer_ragged", [q1, k1, v1, shared_k, shared_v, _i32(6, 3),
                                               _i32(7)], heads, n_outputs=3, **tol),
        OpCase("packed_rotary_prompt", [packed, None, None, None, None, _i32(4, 4), _i32(5),
                                        cos, sin], {**heads, **rotary}, n_outputs=3, **tol),
        OpCase("interleaved_window_softcap_decode",
               [q1, k1, v1, shared_k, shared_v, _i32(5, 2), _i32(6), cos, sin],
               {**heads, **rotary, "rotary_interleaved": 1, "local_window_size": 2,
                "softcap": 2.0, "scale": 0.3}, n_outputs=3, **tol),
        OpCase("subsequent_prompt_rotary",
               [q[:1, :3], k[:1, :3], v[:1, :3], shared_k[:1], shared_v[:1], _i32(6), _i32(7),
                cos, sin], {**heads, **rotary}, n_outputs=3, **tol),
        OpCase("window_prompt_bias", [q, k, v, None, None, _i32(4, 4), _i32(5), None, None,
                                      None, bias], {**heads, "local_window_size": 1},
               **tol),
        OpCase("mqa_decode_f16", [x.astype(np.float16) for x in
                                  (q1, k1[..., :d], v1[..., :d], past_k[:, :1], past_v[:, :1])]
               + [_i32(4, 4), _i32(5)], {"num_heads": hq, "kv_num_heads": 1}, n_outputs=3,
               rtol=2e-3, atol=2e-3),
    ]
