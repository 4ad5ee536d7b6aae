"""The reduce family: every declared case on cpu and webgpu against the op's numpy reference
(per-case tolerances, float16 one ulp), and the reference against onnx.reference."""

from __future__ import annotations

import pytest
from family_check import check_reference, family_cases, run_on

from spawnml_ops import reduce

CASES = family_cases(reduce.OPS)
GAPS: dict[tuple[str, str], str] = {
    ("ReduceLogSumExp", "rank0"): "has no ReduceLogSumExp for a rank-0 input",
    ("ReduceLogSumExp", "rank0_noop"): "has no ReduceLogSumExp for a rank-0 input",
    ("ReduceLogSum", "int32"): "rejects integer inputs",
    ("ReduceLogSumExp", "int32"): "rejects integer inputs",
    ("ReduceSumSquare", "int32"): "returns int64 for int32 input",
    ("ReduceLogSumExp", "nan_inf"): "gives NaN for an all -inf row (log(0) = -inf is exact)",
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
