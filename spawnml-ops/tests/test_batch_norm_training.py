"""BatchNormalization training_mode=1 (opset 15): Y and the running statistics against
onnx.reference (rtol 1e-4, atol 1e-5: batch statistics in float32 on the device) on cpu,
wasm and webgpu; invalid settings raise InvalidModelError / UnsupportedOpError."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import spawnml
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml.testing import op_check
from spawnml_ops.norm import BatchNormalization

RNG = np.random.default_rng(11)
X = (RNG.standard_normal((3, 4, 5, 2)) * 3 + 2).astype(np.float32)
PARAMS = [RNG.standard_normal(4).astype(np.float32) for _ in range(3)]
PARAMS.append(RNG.uniform(0.5, 2.0, 4).astype(np.float32))
NAMES = ["x", "scale", "bias", "mean", "var"]


def _model(attrs: dict, outputs: tuple[str, ...] = ("y", "rm", "rv")):
    infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in NAMES]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    node = helper.make_node("BatchNormalization", NAMES, list(outputs), name="bn", **attrs)
    graph = helper.make_graph([node], "bn", infos, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("backend", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("attrs", [{}, {"epsilon": 1e-2, "momentum": 0.25}])
def test_training_mode_matches_onnx_reference(backend: str, attrs: dict) -> None:
    from onnx.reference import ReferenceEvaluator

    op_check.backend_or_skip(backend)
    model = _model({"training_mode": 1, **attrs})
    feed = dict(zip(NAMES, [X, *PARAMS]))
    expected = ReferenceEvaluator(model).run(None, feed)
    session = spawnml.InferenceSession(model.SerializeToString(), backends=[backend])
    for got, want in zip(session.run(None, feed), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _node(attrs: dict, outputs: tuple[str, ...], opset: int = 15) -> Node:
    return Node("BatchNormalization", NAMES, list(outputs), attrs, name="bn", opset=opset)


def test_running_statistics_keep_the_parameter_dtype() -> None:
    """BN-15: running_mean/var have input_mean's type (onnx.reference casts to X's)."""
    x = X.astype(np.float16)
    node = _node({"training_mode": 1}, ("y", "rm", "rv"))
    y, rm, rv = run_node(spawnml.get_backend("cpu"), BatchNormalization(), node, [x, *PARAMS])
    assert (y.dtype, rm.dtype, rv.dtype) == (np.float16, np.float32, np.float32)
    batch = x.astype(np.float64)
    np.testing.assert_allclose(rm, PARAMS[2] * 0.9 + batch.mean(axis=(0, 2, 3)) * 0.1,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rv, PARAMS[3] * 0.9 + batch.var(axis=(0, 2, 3)) * 0.1,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("attrs", "outputs", "opset", "error", "match"), [
    ({"training_mode": 2}, ("y",), 15, InvalidModelError, "'training_mode' must be 0 or 1"),
    ({"training_mode": 1, "momentum": "x"}, ("y",), 15, InvalidModelError, "'momentum'"),
    ({"training_mode": 1}, ("y", "a", "b", "c"), 15, InvalidModelError, "at most 3"),
    ({}, ("y", "a", "b"), 15, UnsupportedOpError, "training_mode=1"),
    ({}, ("y", "a", "b", "c", "d"), 9, UnsupportedOpError, "from opset 14"),
])
def test_invalid_training_settings_are_rejected(attrs: dict, outputs: tuple, opset: int,
                                                error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        run_node(spawnml.get_backend("cpu"), BatchNormalization(),
                 _node(attrs, outputs, opset), [X, *PARAMS])
