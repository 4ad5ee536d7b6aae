"""Conformance cases of Attention and FlexAttention: layouts (3-D / 4-D), GQA, masks,
KV cache, softcap, windows, padding and the qk_matmul_output modes."""

from __future__ import annotations

import numpy as np

from spawnml.op import OpCase


def _rand(seed: int, *shape: int, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def attention_cases() -> list[OpCase]:
    q, k, v = _rand(0, 2, 4, 3, 8), _rand(1, 2, 2, 5, 8), _rand(2, 2, 2, 5, 6)
    q3, k3, v3 = _rand(3, 2, 3, 16), _rand(4, 2, 5, 8), _rand(5, 2, 5, 8)
    past_k, past_v = _rand(6, 2, 2, 4, 8), _rand(7, 2, 2, 4, 6)
    fmask = np.where(_rand(8, 3, 9) > 1.0, -np.inf, _rand(9, 3, 9)).astype(np.float32)
    bmask = _rand(10, 2, 1, 3, 5) > -0.5
    bmask[0, 0, 1] = False  # a fully masked row
    nonpad = np.array([3, 5], np.int64)
    heads3 = {"q_num_heads": 2, "kv_num_heads": 1}
    return [
        OpCase("4d_gqa", [q, k, v], rtol=1e-4, atol=1e-5),
        OpCase("4d_causal_scaled_softcap", [q, k, v], {"is_causal": 1, "scale": 0.2,
                                                       "softcap": 1.5}, rtol=1e-4, atol=1e-5),
        OpCase("3d_gqa_causal", [q3, k3, v3], {**heads3, "is_causal": 1}, rtol=1e-4, atol=1e-5),
        OpCase("past_float_mask_all_outputs", [q, k, v, fmask, past_k, past_v],
               {"qk_matmul_output_mode": 2}, n_outputs=4, rtol=1e-4, atol=1e-5),
        OpCase("bool_mask_fully_masked_row_mode3", [q, k, v, bmask],
               {"qk_matmul_output_mode": 3}, n_outputs=4, rtol=1e-4, atol=1e-5),
        OpCase("nonpad_causal", [q, k, v, None, None, None, nonpad], {"is_causal": 1},
               opset=24, rtol=1e-4, atol=1e-5),
        OpCase("window_short_mask", [q, k, v, fmask[:, :3]],
               {"left_window_size": 1, "right_window_size": 1}, opset=25, rtol=1e-4,
               atol=1e-5),
        OpCase("3d_past_present", [q3, k3, v3, None, past_k[:, :1], past_k[:, :1]],
               {**heads3, "is_causal": 1}, n_outputs=3, rtol=1e-4, atol=1e-5),
        OpCase("f16", [q.astype(np.float16), k.astype(np.float16), v.astype(np.float16)],
               {"is_causal": 1}, rtol=2e-3, atol=2e-3),
    ]


def flex_cases() -> list[OpCase]:
    q, k, v = _rand(0, 2, 4, 3, 8), _rand(1, 2, 2, 5, 8), _rand(2, 2, 2, 5, 6)
    return [
        OpCase("gqa", [q, k, v], opset=1, rtol=1e-4, atol=1e-5),
        OpCase("scaled", [q, k[:, :1], v[:, :1]], {"scale": 0.3}, opset=1, rtol=1e-4,
               atol=1e-5),
        OpCase("f16", [q.astype(np.float16), k.astype(np.float16), v.astype(np.float16)],
               opset=1, rtol=2e-3, atol=2e-3),
    ]
