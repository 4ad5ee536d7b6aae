"""Out-of-range indices raise InvalidInputError on every backend (issue #20), as onnxruntime
refuses them: the host checks known indices, and the device counts the others in a check
kernel read back with the outputs. Before, cpu and wasm clamped and webgpu read zeros.

Each op runs three times per session (plan, record, replay), so the eager and the recorded
paths are both checked; a valid run after a refused one must still be right."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper

from spawnml import InferenceSession, InvalidInputError, InvalidModelError, get_available_backends
from spawnml_ops.indexing import CHECK_BLOCK

I64 = TensorProto.INT64
BACKENDS = [b for b in ("cpu", "opencl", "webgpu", "webgl", "wasm") if b in
            get_available_backends()]
DATA = np.arange(20, dtype=np.float32).reshape(4, 5)


def _model(op: str, idx_shape, **attrs):
    inputs = ["x", "i"] + (["u"] if op.startswith("Scatter") else [])
    graph_inputs = [("x", F, list(DATA.shape)), ("i", I64, list(idx_shape))]
    if op == "ScatterND":
        graph_inputs.append(("u", F, list(idx_shape[:-1]) + list(DATA.shape[idx_shape[-1]:])))
    elif op == "ScatterElements":
        graph_inputs.append(("u", F, list(idx_shape)))
    return make_model([helper.make_node(op, inputs, ["y"], **attrs)], graph_inputs,
                      [("y", F, None)])


# (op, attributes, good indices, bad indices): bad ones are one past the end or below -n
CASES = {
    "Gather": ("Gather", {"axis": 1}, np.array([[0, -5], [4, 2]]), np.array([[0, 5], [1, 2]])),
    "Gather_negative": ("Gather", {"axis": 0}, np.array([-4, 3]), np.array([-5, 0])),
    "GatherElements": ("GatherElements", {"axis": 0}, np.array([[3, -4, 0, 1, 2]]),
                       np.array([[3, 4, 0, 1, 2]])),
    "GatherND": ("GatherND", {}, np.array([[3, 4], [-1, -5]]), np.array([[3, 4], [0, 5]])),
    "ScatterND": ("ScatterND", {}, np.array([[1], [-1]]), np.array([[1], [4]])),
    "ScatterElements": ("ScatterElements", {"axis": 1}, np.array([[4, 0], [1, -5]]),
                        np.array([[4, 0], [1, -6]])),
}


def _feeds(model, idx):
    feeds = {"x": DATA, "i": idx.astype(np.int64)}
    if len(model.graph.input) == 3:
        shape = [d.dim_value for d in model.graph.input[2].type.tensor_type.shape.dim]
        feeds["u"] = np.full(shape, -1.0, np.float32)
    return feeds


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_out_of_range_indices_raise_on_every_backend(name, backend):
    op, attrs, good, bad = CASES[name]
    model = _model(op, good.shape, **attrs)
    ort_session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime refuses them too
        ort_session.run(None, _feeds(model, bad))
    (expected,) = ort_session.run(None, _feeds(model, good))
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        for _ in range(3):  # plan, record, replay
            (got,) = session.run(None, _feeds(model, good))
            np.testing.assert_array_equal(got, expected)
            with pytest.raises(InvalidInputError, match=f"{op} node.*1 index value"):
                session.run(None, _feeds(model, bad))


@pytest.mark.parametrize("backend", BACKENDS)
def test_indices_beyond_one_check_block_are_all_counted(backend):
    """Indices spanning several blocks of the check kernel: each bad one is counted, and an
    int64 index beyond int32 is out of range (or refused at upload where int64 is stored as
    int32)."""
    n = 2 * CHECK_BLOCK + 7
    model = _model("Gather", [n], axis=1)
    idx = np.zeros(n, np.int64)
    idx[[3, CHECK_BLOCK + 1, n - 1]] = [5, -6, 2**40]
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        with pytest.raises(InvalidInputError, match=r"3 index value|outside the int32 range"):
            session.run(None, _feeds(model, idx))


def test_constant_out_of_range_indices_are_a_model_error():
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                       [("x", F, [4, 5])], [("y", F, None)], {"i": np.array([1, 7], np.int64)})
    with pytest.raises((InvalidModelError, InvalidInputError), match=r"outside \[-5, 4\]"):
        with InferenceSession(model.SerializeToString(), backends="cpu") as session:
            session.run(None, {"x": DATA})
