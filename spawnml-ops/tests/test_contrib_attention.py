"""com.microsoft GroupQueryAttention, RotaryEmbedding and MatMulNBits against onnxruntime's
CPU provider on every available backend, plus bad-input errors naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from contrib_oracle import check_case, node_model, op_cases, run_spawnml

from spawnml.errors import SpawnMLError, UnsupportedOpError
from spawnml_ops.contrib.gqa import GroupQueryAttention
from spawnml_ops.contrib.mha import MultiHeadAttention
from spawnml_ops.contrib.rotary import RotaryEmbedding


@pytest.mark.parametrize("op,case,backend", op_cases([GroupQueryAttention, RotaryEmbedding,
                                                      MultiHeadAttention]))
def test_matches_onnxruntime(op, case, backend) -> None:
    check_case(op, case, backend)


def _gqa_inputs(d: int = 16) -> list:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 4 * d)).astype(np.float32)
    kv = rng.standard_normal((1, 2, 2 * d)).astype(np.float32)
    return [q, kv, kv, None, None, np.array([1], np.int32), np.array([2], np.int32)]


def _bad(op_type: str, inputs, attrs, match: str, error=SpawnMLError, n_outputs=1) -> None:
    model = node_model(op_type, "com.microsoft", inputs, attrs, n_outputs, name="bad")
    with pytest.raises(error, match=rf"{op_type} node 'bad'.*{match}"):
        run_spawnml(model, inputs, "cpu")


def test_gqa_rejects_bad_heads_shapes_and_attributes() -> None:
    heads = {"num_heads": 4, "kv_num_heads": 2}
    _bad("GroupQueryAttention", _gqa_inputs(), {"num_heads": 4, "kv_num_heads": 3},
         "multiple of kv_num_heads")
    bad_k = _gqa_inputs()
    bad_k[1] = bad_k[1][..., :8]
    _bad("GroupQueryAttention", bad_k, heads, "key")
    no_lens = _gqa_inputs()
    no_lens[5] = None
    _bad("GroupQueryAttention", no_lens, heads, "seqlens_k")
    _bad("GroupQueryAttention", _gqa_inputs(), {**heads, "smooth_softmax": 1},
         "smooth_softmax", UnsupportedOpError)
    _bad("GroupQueryAttention", _gqa_inputs(), {**heads, "do_rotary": 1}, "cos_cache")
    _bad("GroupQueryAttention", _gqa_inputs(), {**heads, "local_window_size": 0},
         "local_window_size")


def test_rotary_rejects_mismatched_caches() -> None:
    x = np.ones((1, 3, 16), np.float32)
    pos = np.array([[0, 1, 2]], np.int64)
    cos = np.ones((8, 4), np.float32)
    _bad("RotaryEmbedding", [x, pos, cos, np.ones((8, 3), np.float32)], {}, "sin_cache")
    _bad("RotaryEmbedding", [x, np.array([[0, 1]], np.int64), cos, cos], {}, "position_ids")
    _bad("RotaryEmbedding", [x, pos, cos, cos], {"is_packed_batching": 1},
         "is_packed_batching", UnsupportedOpError)


def test_mha_rejects_mismatched_key_and_unsupported_forms() -> None:
    q = np.ones((1, 3, 16), np.float32)
    _bad("MultiHeadAttention", [q, np.ones((1, 4, 8), np.float32), q], {"num_heads": 2},
         "key")
    _bad("MultiHeadAttention", [q], {"num_heads": 2}, "packed QKV", UnsupportedOpError)
    _bad("MultiHeadAttention", [q, q, q], {"num_heads": 3}, "multiple of num_heads")
