"""MatMul, Gemm and Einsum: every declared case on cpu and webgpu against the op's numpy
reference (per-case tolerances, float16 one ulp), the reference against onnx.reference,
and attribute/shape validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

import spawnml
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import linalg
from spawnml_ops.linalg import Einsum, Gemm, MatMul

CASES = family_cases(linalg.OPS)
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


def _run(op, attrs, *inputs, opset=21):
    node = Node(op.op_type, [f"x{i}" for i in range(len(inputs))], ["y"], attrs, name="n1",
                opset=opset)
    return run_node(spawnml.get_backend("cpu"), op, node, list(inputs))


def test_matmul_rejects_mismatched_inner_dims() -> None:
    with pytest.raises(InvalidModelError, match=r"n1.*inner dims"):
        _run(MatMul(), {}, np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32))


def test_gemm_validates_attributes_and_c() -> None:
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(InvalidModelError, match=r"n1.*'transA'"):
        _run(Gemm(), {"transA": 2}, a, b)
    with pytest.raises(InvalidModelError, match=r"n1.*C .* does not broadcast"):
        _run(Gemm(), {}, a, b, np.ones((3,), np.float32))


def test_gemm_optional_c_and_omitted_input() -> None:
    a, b = np.eye(2, dtype=np.float32), np.full((2, 2), 3.0, np.float32)
    op = Gemm()
    node = Node("Gemm", ["a", "b", ""], ["y"], {"alpha": 2.0}, name="n1", opset=13)
    (y,) = run_node(spawnml.get_backend("cpu"), op, node, [a, b, None])
    np.testing.assert_array_equal(y, np.full((2, 2), 6.0, np.float32))


def test_einsum_equation_errors_name_the_attribute() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidModelError, match=r"n1.*'equation'"):
        _run(Einsum(), {"equation": "ij,jk->ik"}, x)
    with pytest.raises(InvalidModelError, match=r"n1.*'equation'"):
        _run(Einsum(), {"equation": "ijk->i"}, x)
    with pytest.raises(InvalidModelError, match=r"n1.*label 'j'"):
        _run(Einsum(), {"equation": "ij,jk->ik"}, x, np.zeros((2, 2), np.float32))


def test_einsum_four_reduced_labels_and_too_many() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 2, 2, 3)).astype(np.float32)
    (y,) = _run(Einsum(), {"equation": "abcde->e"}, x)
    np.testing.assert_allclose(y, x.sum(axis=(0, 1, 2, 3)), rtol=1e-5)
    with pytest.raises(UnsupportedOpError, match="5 labels"):
        _run(Einsum(), {"equation": "abcde->"}, x)


def test_matmul_large_k_stays_accurate() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 2048)).astype(np.float32)
    b = rng.standard_normal((2048, 3)).astype(np.float32)
    (y,) = _run(MatMul(), {}, a, b)
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
