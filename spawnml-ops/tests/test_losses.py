"""Losses: every declared case on cpu and webgpu against the numpy reference, the reference
against onnx.reference, kernel coverage and attribute validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on
from misc_lowering import assert_lowers

import spawnml
from spawnml.errors import InvalidModelError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import losses
from spawnml_ops.losses import NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss

CASES = family_cases(losses.OPS)


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, {})


@pytest.mark.parametrize("op,case", CASES)
def test_runs_as_kernels(op, case) -> None:
    assert_lowers(op, case)


def test_sce_mean_equals_manual_cross_entropy() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = np.array([1, 0, 5, 2], np.int64)
    node = Node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss"], {}, opset=13)
    (loss,) = run_node(spawnml.get_backend("cpu"), SoftmaxCrossEntropyLoss(), node, [x, t])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    np.testing.assert_allclose(loss, -logp[np.arange(4), t].mean(), rtol=1e-5)


def test_bad_reduction_and_label_shape() -> None:
    op = NegativeLogLikelihoodLoss()
    x, t = np.zeros((2, 3), np.float32), np.zeros(2, np.int64)
    node = Node(op.op_type, ["x", "t"], ["y"], {"reduction": "avg"}, name="nll", opset=13)
    with pytest.raises(InvalidModelError, match=r"nll.*reduction"):
        op.reference(node, [x, t])
    node = Node(op.op_type, ["x", "t"], ["y"], {}, name="nll", opset=13)
    with pytest.raises(InvalidModelError, match=r"nll.*labels shape"):
        op.reference(node, [x, np.zeros(3, np.int64)])
