"""binary ops: every case on cpu and webgpu against the numpy reference (tolerances per case:
rtol/atol 1e-6..2e-5 for f32, one f16 ulp for float16, exact for integers and bools), and
the reference against onnx.reference."""

from __future__ import annotations

import pytest

from spawnml.testing import op_check
from spawnml_ops.binary import OPS

POW_GAP = ("numpy's pow shortcut for exponent 0.5 gives pow(-inf, 0.5) = nan; C pow and "
           "onnxruntime give inf")
test_cpu_matches_reference, test_reference_matches_onnx_reference, test_webgpu_matches_reference = (
    op_check.standard_tests(OPS, reference_gaps={("Pow", "f64"): POW_GAP})
)


@pytest.mark.parametrize(("op_type", "attrs", "dtypes", "opset", "error", "match"), [
    ("Mod", {"fmod": 2}, ["int32", "int32"], 13, "InvalidModelError", "fmod"),
    ("Mod", {"fmod": 0}, ["float32", "float32"], 13, "InvalidModelError", "fmod must be 1"),
    ("Add", {}, ["float32", "int32"], 14, "InvalidModelError", "share one dtype"),
    ("Add", {}, ["float8_e4m3fn", "float8_e4m3fn"], 19, "UnsupportedOpError", "float8_e4m3fn"),
    ("Pow", {}, ["float32", "int4"], 21, "UnsupportedOpError", "exponent dtype int4"),
    ("Sum", {}, ["bool", "bool"], 13, "InvalidModelError", "bool"),
])
def test_invalid_attributes_and_dtypes_are_rejected(op_type: str, attrs: dict, dtypes: list,
                                                    opset: int, error: str, match: str) -> None:
    from spawnml import errors

    with pytest.raises(getattr(errors, error), match=match):
        op_check.infer_node(op_type, attrs, dtypes, opset)


def test_shapes_that_do_not_broadcast_are_rejected() -> None:
    from spawnml.dtypes import DType
    from spawnml.errors import InvalidModelError
    from spawnml.op import Node, TensorInfo
    from spawnml.registry import find_op

    node = Node("Add", ["a", "b"], ["y"], opset=14)
    infos = [TensorInfo(DType.float32, (2, 3)), TensorInfo(DType.float32, (4,))]
    with pytest.raises(InvalidModelError, match="broadcast"):
        find_op("", "Add", 14).infer(node, infos, [None, None])
