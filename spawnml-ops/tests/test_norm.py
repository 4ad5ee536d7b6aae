"""Normalisation ops: every declared case on cpu and webgpu against the op's numpy reference,
the reference against onnx.reference (where that is right), and attribute validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

import spawnml
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import norm
from spawnml_ops.norm import (
    BatchNormalization,
    GroupNormalization,
    LayerNormalization,
    LpNormalization,
)

CASES = family_cases(norm.OPS)
GAPS = {
    ("BatchNormalization", "spatial0"): "it does not implement spatial=0 (opset 7)",
    ("MeanVarianceNormalization", "opset1_across_no_variance"): "it has no opset-1 schema",
    ("LRN", "size5_few_batches"): "its channel loop runs over N (right only when N == C)",
    ("LpNormalization", "l1_axis0"): "it reads axis=0 as unset and sums x, not |x|, for p=1",
}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def _run(op, attrs, *inputs, outputs=("y",), opset=21):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    node = Node(op.op_type, names, list(outputs), attrs, name="bn1", opset=opset)
    return run_node(spawnml.get_backend("cpu"), op, node, list(inputs))


def test_batchnorm_training_outputs_before_opset_14_are_unsupported() -> None:
    x = np.zeros((1, 2, 2, 2), np.float32)
    p = [np.ones(2, np.float32)] * 4
    with pytest.raises(UnsupportedOpError, match="training_mode=1"):
        _run(BatchNormalization(), {}, x, *p, outputs=("y", "m", "v"), opset=9)


def test_batchnorm_parameter_shapes_are_checked() -> None:
    x = np.zeros((1, 2, 2, 2), np.float32)
    with pytest.raises(InvalidModelError, match=r"bn1.*input_var"):
        _run(BatchNormalization(), {}, x, *[np.ones(2, np.float32)] * 3, np.ones(3, np.float32))


def test_layer_norm_l2_outputs_are_mean_and_inv_std() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    y, mean, inv = _run(LayerNormalization(), {"epsilon": 1e-5}, x, np.ones(8, np.float32),
                        outputs=("y", "m", "i"))
    np.testing.assert_allclose(mean[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv[:, 0], 1 / np.sqrt(x.var(axis=1) + 1e-5), rtol=1e-5)
    np.testing.assert_allclose(y, (x - x.mean(1, keepdims=True)) * inv, rtol=1e-5, atol=1e-5)


def test_layer_norm_axis_out_of_range() -> None:
    with pytest.raises(InvalidModelError, match=r"bn1.*axis 2"):
        _run(LayerNormalization(), {"axis": 2}, np.zeros((2, 2), np.float32),
             np.ones(2, np.float32))


def test_group_norm_groups_must_divide_channels() -> None:
    x = np.zeros((1, 6, 2), np.float32)
    with pytest.raises(InvalidModelError, match=r"bn1.*'num_groups'"):
        _run(GroupNormalization(), {"num_groups": 4}, x, np.ones(6, np.float32),
             np.ones(6, np.float32))


def test_group_norm_opset18_takes_per_group_parameters() -> None:
    x = np.zeros((1, 6, 2), np.float32)
    with pytest.raises(InvalidModelError, match=r"bn1.*scale"):
        _run(GroupNormalization(), {"num_groups": 2}, x, np.ones(6, np.float32),
             np.ones(6, np.float32), opset=18)


def test_lp_normalization_p_must_be_1_or_2() -> None:
    with pytest.raises(InvalidModelError, match=r"bn1.*'p'"):
        _run(LpNormalization(), {"p": 3}, np.ones((2, 2), np.float32))
