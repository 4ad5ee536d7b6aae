"""Opset 1-6 broadcasting (``broadcast``/``axis`` of the binary ops, PRelu's per-channel
slope, Gemm's ``broadcast``): whole models through InferenceSession on cpu and wasm
against the spec's rule written out in numpy and, where onnx's version converter can
rewrite the model to opset 7, against onnx.reference on the converted model (float32:
rtol 1e-6, atol 1e-6; comparisons and integers exact). Invalid attributes and shapes raise
InvalidModelError naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import spawnml
from spawnml.errors import InvalidModelError
from spawnml.testing import op_check

BACKENDS = ("cpu", "wasm")
A_SHAPE = (2, 3, 4, 5)


def _model(op_type: str, inputs: list[np.ndarray], attrs: dict, opset: int = 6) -> bytes:
    names = [f"x{i}" for i in range(len(inputs))]
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                           a.shape) for n, a in zip(names, inputs)]
    node = helper.make_node(op_type, names, ["y"], name=f"{op_type.lower()}_0", **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    graph = helper.make_graph([node], "legacy", infos, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=3)


def _run(backend: str, model, inputs: list[np.ndarray]) -> np.ndarray:
    op_check.backend_or_skip(backend)
    session = spawnml.InferenceSession(model.SerializeToString(), backends=[backend])
    feed = {f"x{i}": a for i, a in enumerate(inputs)}
    return session.run(None, feed)[0]


def _spec_reshape(a_shape: tuple, b: np.ndarray, axis: int | None) -> np.ndarray:
    """The Add-6 spec: B's dims match A's from ``axis`` (default: the trailing ones)."""
    if b.size == 1:
        return b.reshape(())
    start = len(a_shape) - b.ndim if axis is None else axis
    return b.reshape((1,) * start + b.shape + (1,) * (len(a_shape) - start - b.ndim))


RNG = np.random.default_rng(3)
A = RNG.uniform(0.5, 4.0, A_SHAPE).astype(np.float32)
B_CASES = [  # (B shape, axis)
    ((3, 4), 1), ((2, 1), 0), ((4, 5), None), ((5,), None), ((1, 1), None), ((3,), 1),
    ((2, 3, 4, 5), None),
]
NUMPY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
         "Pow": np.power, "Greater": np.greater, "Less": np.less}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op_type", sorted(NUMPY))
@pytest.mark.parametrize(("b_shape", "axis"), B_CASES)
def test_broadcast_attributes_follow_the_opset_6_rule(backend: str, op_type: str,
                                                      b_shape: tuple, axis: int | None) -> None:
    b = RNG.uniform(0.5, 2.0, b_shape).astype(np.float32)
    attrs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    got = _run(backend, _model(op_type, [A, b], attrs), [A, b])
    expected = NUMPY[op_type](A.astype(np.float64), _spec_reshape(A.shape, b, axis))
    assert got.shape == A.shape
    np.testing.assert_allclose(got, expected.astype(got.dtype), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_logic_ops_broadcast_on_bools(backend: str) -> None:
    a = RNG.integers(0, 2, A_SHAPE).astype(bool)
    b = RNG.integers(0, 2, (3, 4)).astype(bool)
    for op_type, fn in (("And", np.logical_and), ("Or", np.logical_or),
                        ("Xor", np.logical_xor)):
        got = _run(backend, _model(op_type, [a, b], {"broadcast": 1, "axis": 1}), [a, b])
        np.testing.assert_array_equal(got, fn(a, b.reshape(1, 3, 4, 1)))


def test_matches_onnx_reference_on_the_version_converted_model() -> None:
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator

    b = RNG.uniform(0.5, 2.0, (2, 1)).astype(np.float32)
    model = _model("Mul", [A, b], {"broadcast": 1, "axis": 0})
    converted = version_converter.convert_version(model, 7)  # B gets Unsqueezed
    expected = ReferenceEvaluator(converted).run(None, {"x0": A, "x1": b})[0]
    np.testing.assert_allclose(_run("cpu", model, [A, b]), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_prelu_before_opset_7_applies_a_vector_slope_per_channel(backend: str) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, -0.2, 0.3], np.float32)
    got = _run(backend, _model("PRelu", [x, slope], {}), [x, slope])
    np.testing.assert_allclose(got, np.where(x >= 0, x, x * slope[:, None]), rtol=1e-6)
    shared = np.array([0.25], np.float32)
    got = _run(backend, _model("PRelu", [x, shared], {}), [x, shared])
    np.testing.assert_allclose(got, np.where(x >= 0, x, x * 0.25), rtol=1e-6)


def test_prelu_from_opset_7_broadcasts_numpy_style() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    slope = np.ones(3, np.float32)
    with pytest.raises(InvalidModelError, match="do not broadcast"):
        _run("cpu", _model("PRelu", [x, slope], {}, opset=9), [x, slope])


@pytest.mark.parametrize(("b_shape", "attrs", "match"), [
    ((3, 4), {}, r"add_0.*differs from A .* broadcast is 0"),
    ((3, 4), {"broadcast": 2}, r"'broadcast' must be 0 or 1"),
    ((1, 2, 3, 4, 5), {"broadcast": 1}, "higher rank"),
    ((3, 4), {"broadcast": 1, "axis": 3}, "outside A"),
    ((4, 3), {"broadcast": 1, "axis": 1}, "does not broadcast to A"),
    ((3, 4), {"broadcast": 1, "axis": 1.5}, "'axis' must be INT"),  # checked at import
])
def test_invalid_legacy_broadcasts_are_rejected(b_shape: tuple, attrs: dict,
                                                 match: str) -> None:
    b = np.ones(b_shape, np.float32)
    with pytest.raises(InvalidModelError, match=match):
        _run("cpu", _model("Add", [A, b], attrs), [A, b])


def test_gemm_without_broadcast_needs_a_full_c_before_opset_7() -> None:
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    c = np.arange(5, dtype=np.float32)
    got = _run("cpu", _model("Gemm", [a, b, c], {"broadcast": 1}), [a, b, c])
    np.testing.assert_allclose(got, a @ b + c)
    with pytest.raises(InvalidModelError, match=r"C \(5,\) differs from \(M, N\)"):
        _run("cpu", _model("Gemm", [a, b, c], {}), [a, b, c])
