"""RNN, GRU, LSTM: every declared case (directions, layouts, sequence_lens, initial states,
activations, clip, peepholes, input_forget, linear_before_reset) on cpu and opencl vs the
op's float32 reference (1e-5 relative, 1e-6 absolute), the reference vs onnx.reference,
and the attribute checks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.op import Node, TensorInfo
from spawnml_ops import rnn

sys.path.insert(0, str(Path(__file__).parent))  # family_check, under --import-mode=importlib
from family_check import check_reference, family_cases, run_on

CASES = family_cases(rnn.OPS)
GAPS = {}
for _op, _case in (p.values for p in CASES):
    if "activation" in _case.name or _case.name in ("clip", "input_forget"):
        GAPS[(_op.op_type, _case.name)] = "onnx.reference ignores activations/clip/input_forget"
    if len(_case.inputs) > 4 and _case.inputs[4] is not None:
        GAPS[(_op.op_type, _case.name)] = "onnx.reference ignores sequence_lens"


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_opencl(op, case) -> None:
    run_on("opencl", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def _infer(op, attrs, x=(3, 2, 4), w=(1, 3, 4), r=(1, 3, 3), opset=22):
    node = Node(op.op_type, ["x", "w", "r"], ["y", "yh"], attrs, opset=opset)
    infos = [TensorInfo(DType.float32, s) for s in (x, w, r)]
    return op.infer(node, infos, [None] * 3)


def test_shapes_by_layout() -> None:
    y, yh = _infer(rnn.RNN(), {"hidden_size": 3})
    assert y.shape == (3, 1, 2, 3) and yh.shape == (1, 2, 3)
    y, yh = _infer(rnn.RNN(), {"hidden_size": 3, "layout": 1}, x=(2, 3, 4))
    assert y.shape == (2, 3, 1, 3) and yh.shape == (2, 1, 3)


def test_attribute_checks() -> None:
    with pytest.raises(InvalidModelError, match="direction"):
        _infer(rnn.RNN(), {"direction": "sideways"})
    with pytest.raises(InvalidModelError, match="activations"):
        _infer(rnn.RNN(), {"activations": ("Tanh", "Tanh")})
    with pytest.raises(UnsupportedOpError, match="activation"):
        _infer(rnn.RNN(), {"activations": ("Gelu",)})
    with pytest.raises(InvalidModelError, match="layout"):
        _infer(rnn.RNN(), {"layout": 1}, opset=7)
    with pytest.raises(InvalidModelError, match="input 1"):
        _infer(rnn.RNN(), {"hidden_size": 3}, w=(1, 4, 4))


def test_sequence_lens_zero_padding_and_final_state() -> None:
    """Beyond a sequence's length Y is 0 and Y_h holds its last valid state."""
    op = rnn.GRU()
    case = next(c for c in op.cases() if c.name == "seq_lens")
    node = Node("GRU", ["x", "w", "r", "b", "l", "h"], ["y", "yh"], case.attrs, opset=22)
    y, yh = op.reference(node, case.inputs)
    assert np.all(y[1:, :, 1] == 0)  # batch 1 has length 1
    np.testing.assert_array_equal(yh[0, 1], y[0, 0, 1])  # forward: state at t = 0
    np.testing.assert_array_equal(yh[1, 1], y[0, 1, 1])  # reverse: ends at t = 0
