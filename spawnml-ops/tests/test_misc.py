"""Miscellaneous ops: every declared case on cpu and webgpu against the numpy reference,
the reference against onnx.reference, kernel coverage and validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on
from misc_lowering import assert_lowers

from spawnml.errors import InvalidModelError
from spawnml.op import Node
from spawnml_ops import misc
from spawnml_ops.misc import BitCast, CenterCropPad, Col2Im, CumProd, TensorScatter

CASES = family_cases(misc.OPS)
GAPS = {
    ("NonMaxSuppression", "limit_zero"): "it cannot run with the optional inputs omitted",
    ("Unique", "neg_axis_unsorted"): "unsorted with an axis, it takes the rows along axis 0",
    ("Adam", "single"): "it returns float64 outputs for a single float32 tensor",
    ("Adam", "t0"): "it returns float64 outputs for a single float32 tensor",
}
KERNEL_CASES = [p for p in family_cases([BitCast, CumProd, CenterCropPad, Col2Im,
                                         TensorScatter])
                if not p.values[1].name.endswith("_host")]


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


def test_bitcast_widths_must_match() -> None:
    node = Node("BitCast", ["x"], ["y"], {"to": 7}, name="bc", opset=26)
    with pytest.raises(InvalidModelError, match=r"bc.*widths"):
        BitCast().reference(node, [np.zeros(2, np.float32)])


def test_compress_condition_longer_than_axis() -> None:
    from spawnml_ops.misc_host import Compress

    node = Node("Compress", ["x", "c"], ["y"], {"axis": 0}, name="cp", opset=11)
    with pytest.raises(InvalidModelError, match="cp"):
        Compress().reference(node, [np.zeros((2, 2), np.float32), np.ones(3, bool)])
