"""elementwise ops: every case on cpu and webgpu against the numpy reference (tolerances per case:
rtol/atol 1e-6..2e-5 for f32, one f16 ulp for float16, exact for integers and bools), and
the reference against onnx.reference."""

from __future__ import annotations

import pytest

from spawnml.testing import op_check
from spawnml_ops.activations import OPS as ACTIVATION_OPS
from spawnml_ops.elementwise import MATH_OPS

test_cpu_matches_reference, test_reference_matches_onnx_reference, test_webgpu_matches_reference = (
    op_check.standard_tests(MATH_OPS + ACTIVATION_OPS)
)


@pytest.mark.parametrize(("op_type", "attrs", "dtypes", "opset", "error", "match"), [
    ("Gelu", {"approximate": "fast"}, ["float32"], 20, "InvalidModelError", "approximate"),
    ("IsInf", {"detect_positive": 2}, ["float32"], 20, "InvalidModelError", "detect_positive"),
    ("Celu", {"alpha": 0.0}, ["float32"], 12, "InvalidModelError", "alpha"),
    ("LeakyRelu", {"alpha": "x"}, ["float32"], 16, "InvalidModelError", "alpha"),
    ("Sqrt", {}, ["int32"], 13, "InvalidModelError", "int32"),
    ("Abs", {}, ["float8_e5m2"], 19, "UnsupportedOpError", "float8_e5m2"),
    ("Clip", {}, ["float32", "float32", "float32"], 6, "InvalidModelError", "opset 11"),
    ("PRelu", {}, ["float32", "float16"], 16, "InvalidModelError", "slope"),
])
def test_invalid_attributes_and_dtypes_are_rejected(op_type: str, attrs: dict, dtypes: list,
                                                    opset: int, error: str, match: str) -> None:
    from spawnml import errors

    with pytest.raises(getattr(errors, error), match=match):
        op_check.infer_node(op_type, attrs, dtypes, opset)
