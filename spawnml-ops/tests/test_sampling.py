"""Sampling ops (GridSample, AffineGrid, RoiAlign, DeformConv): every declared case on cpu
and webgpu against the numpy reference, the reference against onnx.reference, kernel
coverage and validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on
from misc_lowering import assert_lowers

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError
from spawnml.op import Node, TensorInfo
from spawnml_ops import sampling
from spawnml_ops.sampling import AffineGrid, GridSample

CASES = family_cases(sampling.OPS)
KERNEL_CASES = family_cases([GridSample, AffineGrid])
GAPS = {("GridSample", "opset16_bilinear"): "it only knows the opset-20 mode names"}
GAPS.update({("GridSample", f"nonfinite_grid_{c}"): "onnx.reference cannot convert a NaN or "
             "infinite coordinate to an integer (it raises)"
             for c in ("linear_zeros", "cubic_zeros", "linear_border", "linear_reflection")})


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


@pytest.mark.parametrize("op,case", KERNEL_CASES)
def test_runs_as_kernels(op, case) -> None:
    assert_lowers(op, case)


def test_grid_sample_identity_grid_reproduces_input() -> None:
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    node = Node("AffineGrid", ["t", "s"], ["g"], {"align_corners": 1}, opset=20)
    (grid,) = AffineGrid().reference(node, [theta, np.array([1, 1, 3, 4], np.int64)])
    node = Node("GridSample", ["x", "g"], ["y"], {"align_corners": 1}, opset=20)
    (y,) = GridSample().reference(node, [x, grid])
    np.testing.assert_allclose(y, x, atol=1e-5)


def test_grid_sample_rejects_unknown_mode() -> None:
    node = Node("GridSample", ["x", "g"], ["y"], {"mode": "area"}, name="gs", opset=20)
    infos = [TensorInfo(DType.float32, (1, 1, 2, 2)), TensorInfo(DType.float32, (1, 2, 2, 2))]
    with pytest.raises(InvalidModelError, match=r"gs.*mode"):
        GridSample().infer(node, infos, [None, None])
