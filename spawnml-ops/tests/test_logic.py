"""logic ops: every case on cpu and webgpu against the numpy reference (tolerances per case:
rtol/atol 1e-6..2e-5 for f32, one f16 ulp for float16, exact for integers and bools), and
the reference against onnx.reference."""

from __future__ import annotations

import pytest

from spawnml.testing import op_check
from spawnml_ops.logic import OPS

test_cpu_matches_reference, test_reference_matches_onnx_reference, test_webgpu_matches_reference = (
    op_check.standard_tests(OPS)
)


@pytest.mark.parametrize(("op_type", "attrs", "dtypes", "opset", "error", "match"), [
    ("BitShift", {}, ["uint8", "uint8"], 11, "InvalidModelError", "direction"),
    ("BitShift", {"direction": "UP"}, ["uint8", "uint8"], 11, "InvalidModelError", "direction"),
    ("BitShift", {"direction": "LEFT"}, ["int8", "int8"], 11, "InvalidModelError", "opset 28"),
    ("And", {}, ["int32", "int32"], 7, "InvalidModelError", "int32"),
    ("Where", {}, ["int32", "float32", "float32"], 16, "InvalidModelError", "bool"),
    ("Equal", {}, ["uint4", "uint4"], 21, "UnsupportedOpError", "uint4"),
])
def test_invalid_attributes_and_dtypes_are_rejected(op_type: str, attrs: dict, dtypes: list,
                                                    opset: int, error: str, match: str) -> None:
    from spawnml import errors

    with pytest.raises(getattr(errors, error), match=match):
        op_check.infer_node(op_type, attrs, dtypes, opset)
