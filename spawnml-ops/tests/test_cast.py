"""cast ops: every case on cpu and webgpu against the numpy reference (tolerances per case:
rtol/atol 1e-6..2e-5 for f32, one f16 ulp for float16, exact for integers and bools), and
the reference against onnx.reference."""

from __future__ import annotations

import pytest

from spawnml.testing import op_check
from spawnml_ops.cast import OPS

# onnx.reference prints numbers with numpy's str() ("1.0"); onnxruntime with %.8g ("1").
_GAPS = {("Cast", "float_to_string"): "numpy's str() of floats, not onnxruntime's %.8g",
         ("Cast", "int_to_string"): "a numpy <U array, not str objects"}
test_cpu_matches_reference, test_reference_matches_onnx_reference, test_webgpu_matches_reference = (
    op_check.standard_tests(OPS, reference_gaps=_GAPS)
)


@pytest.mark.parametrize(("attrs", "src", "error", "match"), [
    ({"to": 27}, "float32", "UnsupportedOpError", "float6e2m3"),  # float8/int4: exotic
    ({"to": 14}, "float32", "UnsupportedOpError", "complex64"),
    ({"to": 15}, "uint64", "UnsupportedOpError", "complex128"),
    ({"to": 28}, "bfloat16", "UnsupportedOpError", "float6e3m2"),
    ({"to": 99}, "float32", "InvalidModelError", "'to'"),
    ({}, "float32", "InvalidModelError", "'to'"),
    ({"to": 1, "saturate": 3}, "float32", "InvalidModelError", "saturate"),
    ({"to": 1, "round_mode": "sideways"}, "float32", "InvalidModelError", "round_mode"),
])
def test_unsupported_and_invalid_casts_are_rejected(attrs: dict, src: str, error: str,
                                                    match: str) -> None:
    from spawnml import errors

    with pytest.raises(getattr(errors, error), match=match):
        op_check.infer_node("Cast", attrs, [src], 25)
