"""Attention family: every declared case on cpu and webgpu against the op's numpy
reference, the reference against onnx.reference, and attribute validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

import spawnml
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import attention
from spawnml_ops.attention import Attention, FlexAttention
from spawnml_ops.attention_ops import RMSNormalization, RotaryEmbedding
from spawnml_ops.attention_recurrent import CausalConvWithState, LinearAttention

CASES = family_cases(attention.OPS)
GAPS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def _run(op, attrs, *inputs, outputs=("y",), opset=23):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    node = Node(op.op_type, names, list(outputs), attrs, name="att1", opset=opset,
                domain=op.domain)
    return run_node(spawnml.get_backend("cpu"), op, node, list(inputs))


def _qkv(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_attention_3d_needs_head_counts() -> None:
    q, k, v = _qkv((1, 2, 8), (1, 3, 8), (1, 3, 8))
    with pytest.raises(InvalidModelError, match=r"att1.*q_num_heads"):
        _run(Attention(), {}, q, k, v)


def test_attention_heads_must_group() -> None:
    q, k, v = _qkv((1, 3, 2, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(InvalidModelError, match=r"att1.*multiple"):
        _run(Attention(), {}, q, k, v)


def test_attention_past_needs_both_caches() -> None:
    q, k, v, pk = _qkv((1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 2, 4))
    with pytest.raises(InvalidModelError, match=r"att1.*past_value"):
        _run(Attention(), {}, q, k, v, None, pk)


def test_attention_fully_masked_rows_are_zero() -> None:
    q, k, v = _qkv((1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    mask = np.array([[True, False, True], [False, False, False]])
    y, = _run(Attention(), {}, q, k, v, mask)
    assert np.all(y[0, 0, 1] == 0) and np.all(np.isfinite(y))


def test_flex_attention_score_mod_is_unsupported() -> None:
    q, k, v = _qkv((1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    with pytest.raises(UnsupportedOpError, match="score_mod"):
        _run(FlexAttention(), {"score_mod": object()}, q, k, v, opset=1)


def test_rms_normalization_stash_type_is_unsupported() -> None:
    x, w = _qkv((2, 4), (4,))
    with pytest.raises(UnsupportedOpError, match="stash_type"):
        _run(RMSNormalization(), {"stash_type": 0}, x, w)


def test_rotary_dim_must_be_even() -> None:
    x, c = _qkv((1, 1, 2, 8), (2, 2))
    with pytest.raises(InvalidModelError, match=r"att1.*rotary_embedding_dim"):
        _run(RotaryEmbedding(), {"rotary_embedding_dim": 5}, x, c, c)


def test_linear_attention_rule_needs_decay() -> None:
    q = _qkv((1, 2, 4))[0]
    with pytest.raises(InvalidModelError, match=r"att1.*decay"):
        _run(LinearAttention(), {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "gated"},
             q, q, q, opset=27)


def test_causal_conv_weight_shape_is_checked() -> None:
    x, w = _qkv((1, 3, 5), (2, 1, 3))
    with pytest.raises(InvalidModelError, match=r"att1.*weight"):
        _run(CausalConvWithState(), {}, x, w, opset=27)
