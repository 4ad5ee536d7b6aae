"""Softmax, LogSoftmax, Hardmax: cases on cpu and webgpu vs the reference (tolerances per
case: 1e-5 relative for float32, one f16 ulp for float16), reference vs onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

from spawnml.errors import InvalidModelError
from spawnml.op import Node, TensorInfo
from spawnml_ops import softmax

CASES = family_cases(softmax.OPS)
# onnx.reference implements only the opset-13 (single axis) semantics for every version
GAPS = {(op.op_type, c.name): "no pre-opset-13 (flatten at axis) semantics"
        for op, c in (p.values for p in CASES) if (c.opset or 13) < 13}
GAPS[("LogSoftmax", "large_values")] = "log(softmax(x)) underflows to -inf (ours: x - max - lse)"


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def test_rejects_bad_axis_and_dtype() -> None:
    from spawnml.dtypes import DType

    op = softmax.Softmax()
    with pytest.raises(InvalidModelError, match="axis 3"):
        op.infer(Node("Softmax", ["x"], ["y"], {"axis": 3}, opset=13),
                 [TensorInfo(DType.float32, (2, 3))], [None])
    with pytest.raises(InvalidModelError, match="int32"):
        op.infer(Node("Softmax", ["x"], ["y"], opset=13), [TensorInfo(DType.int32, (2,))], [None])


def test_pre13_flattens_at_axis() -> None:
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    old = softmax.Softmax().reference(Node("Softmax", ["x"], ["y"], {"axis": 1}, opset=11), [x])
    new = softmax.Softmax().reference(Node("Softmax", ["x"], ["y"], {"axis": 1}, opset=13), [x])
    np.testing.assert_allclose(old[0].sum(), 1.0, rtol=1e-6)  # one row over 6 elements
    np.testing.assert_allclose(new[0].sum(axis=1), np.ones((1, 3)), rtol=1e-6)
