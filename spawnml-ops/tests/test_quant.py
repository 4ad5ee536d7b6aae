"""Quantisation: every declared case on cpu and opencl vs the op's reference (integers
exact, or within one quantisation step where a case says atol=1: requantisation rounds an
f32 product that may tie differently), the reference vs onnx.reference, and the checks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.op import Node, TensorInfo
from spawnml_ops import quant

sys.path.insert(0, str(Path(__file__).parent))  # family_check, under --import-mode=importlib
from family_check import check_reference, family_cases, run_on

CASES = family_cases(quant.OPS)
SATURATION = "onnx.reference casts rint(x/scale) to int32 before clipping: NaN/Inf/huge wrap"
GAPS = {
    ("QuantizeLinear", "uint8_default"): SATURATION,
    ("QuantizeLinear", "uint8_zp"): SATURATION,
    ("QuantizeLinear", "int8"): SATURATION,
    ("QuantizeLinear", "int8_opset10"): SATURATION,
    ("QuantizeLinear", "per_axis"): SATURATION,
    ("QuantizeLinear", "per_axis_negative"): SATURATION,
    ("QuantizeLinear", "blocked"): SATURATION,
    ("QuantizeLinear", "int16"): SATURATION,
    ("QuantizeLinear", "uint16_output_dtype"): SATURATION,
    ("QuantizeLinear", "float16_in"): SATURATION,
    ("MatMulInteger", "per_row_col_zp"): "onnx.reference subtracts a per-row zero point "
                                         "along K (broadcasting), not per row",
    ("QLinearMatMul", "per_row_col_scales"): "onnx.reference multiplies a per-row a_scale "
                                             "along N (broadcasting), not per row",
    ("DequantizeLinear", "int8"): "onnx.reference has no DequantizeLinear-10",
    ("DynamicQuantizeLinear", "inf"): "onnx.reference: inf scale, int cast of NaN",
}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_opencl(op, case) -> None:
    run_on("opencl", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def test_quantize_saturates_and_rounds_half_to_even() -> None:
    op = quant.QuantizeLinear()
    x = np.array([0.5, 1.5, 2.5, -0.5, 1e10, -np.inf, np.nan], np.float32)
    n = Node("QuantizeLinear", ["x", "s", "z"], ["y"], opset=13)
    (y,) = op.reference(n, [x, np.array(1.0, np.float32), np.array(0, np.int8)])
    assert y.tolist() == [0, 2, 2, 0, 127, -128, -128]


def _infos(*specs):
    return [None if s is None else TensorInfo(DType(s[0]), s[1]) for s in specs]


def test_layout_checks() -> None:
    op = quant.QuantizeLinear()
    n = Node("QuantizeLinear", ["x", "s"], ["y"], {"axis": 0}, opset=13)
    with pytest.raises(InvalidModelError, match="per-axis"):
        op.infer(n, _infos(("float32", (3, 4)), ("float32", (4,))), [None, None])
    nb = Node("QuantizeLinear", ["x", "s"], ["y"], {"axis": 1, "block_size": 2}, opset=21)
    with pytest.raises(InvalidModelError, match="blocked"):
        op.infer(nb, _infos(("float32", (3, 4)), ("float32", (3, 3))), [None, None])
    with pytest.raises(UnsupportedOpError, match="quantised type"):
        op.infer(Node("QuantizeLinear", ["x", "s"], ["y"], {"output_dtype": 27}, opset=21),
                 _infos(("float32", (3,)), ("float32", ())), [None, None])
    with pytest.raises(InvalidModelError, match="opset 21"):
        op.infer(Node("QuantizeLinear", ["x", "s", "z"], ["y"], opset=19),
                 _infos(("float32", (3,)), ("float32", ()), ("int16", ())), [None] * 3)


def test_integer_op_checks() -> None:
    mm = quant.QUANT_MATMUL_OPS[0]()
    with pytest.raises(InvalidModelError, match="inner dimensions"):
        mm.infer(Node("MatMulInteger", ["a", "b"], ["y"], opset=10),
                 _infos(("uint8", (2, 3)), ("uint8", (4, 2))), [None, None])
    conv = quant.QUANT_CONV_OPS[0]()
    with pytest.raises(InvalidModelError, match="channels"):
        conv.infer(Node("ConvInteger", ["x", "w"], ["y"], opset=10),
                   _infos(("uint8", (1, 3, 5, 5)), ("uint8", (2, 2, 3, 3))), [None, None])
