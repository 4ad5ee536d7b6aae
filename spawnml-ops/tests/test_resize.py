"""The resize family: every declared case on cpu and webgpu against the op's numpy reference
(per-case tolerances, float16 one ulp), and the reference against onnx.reference."""

from __future__ import annotations

import pytest
from family_check import check_reference, family_cases, run_on

from spawnml_ops import resize

CASES = family_cases(resize.OPS)
GAPS: dict[tuple[str, str], str] = {
    ("Resize", "nearest_tf_half_pixel_for_nn"): "lacks tf_half_pixel_for_nn",
    ("Resize", "opset10_nearest"): "has no Resize-10 (scales as input 1)",
    ("Upsample", "linear9"): "implements nearest only",
    ("Upsample", "nearest7"): "has no Upsample-7 (scales attribute)",
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
