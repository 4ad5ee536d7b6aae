"""Constants and generators: every declared case on cpu and opencl vs the op's reference
(exact for integers, 1e-5 relative for floats unless a case says otherwise), the reference
vs onnx.reference, and the attribute checks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.op import HostOnly, Node, TensorInfo
from spawnml_ops import generators, random_ops

sys.path.insert(0, str(Path(__file__).parent))  # family_check, under --import-mode=importlib
from family_check import check_reference, family_cases, run_on

CASES = family_cases(generators.OPS)
# Random streams: spawnml's counter hash is not numpy's generator, so only shapes compare.
GAPS = {(op.op_type, c.name): "random streams differ by design (seeded counter hash)"
        for op, c in (p.values for p in CASES) if op.op_type in
        {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli"}}
GAPS[("Dropout", "opset7_mask_same_dtype")] = "onnx.reference gives a bool mask; Dropout-7's is T"
GAPS[("OneHot", "nan_values")] = "onnx.reference computes off + (on - off) * hot: inf - nan"
GAPS[("OneHot", "float_indices")] = "onnx.reference does not cast float indices to int64"
GAPS[("OneHot", "depth1")] = "onnx.reference needs a 0-d depth (ONNX allows one element)"
GAPS[("Dropout", "opset6_is_test")] = "onnx.reference has no Dropout-6"
GAPS[("NonZero", "scalar")] = "onnx.reference returns (0, 1) for a 0-d input; ONNX says (1, n)"


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_opencl(op, case) -> None:
    if op.host_only:
        pytest.skip("host-only op")
    run_on("opencl", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


def node(op_type: str, attrs: dict | None = None, opset: int = 21, n_in: int = 1,
         n_out: int = 1) -> Node:
    return Node(op_type, [f"x{i}" for i in range(n_in)], [f"y{i}" for i in range(n_out)],
                attrs or {}, opset=opset)


def test_random_streams_are_seeded_and_distributed() -> None:
    op = random_ops.RandomUniform()
    n = node("RandomUniform", {"shape": (4000,), "seed": 3.0}, n_in=0)
    a, b = op.reference(n, [])[0], op.reference(n, [])[0]
    np.testing.assert_array_equal(a, b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.02
    other = op.reference(node("RandomUniform", {"shape": (4000,), "seed": 4.0}, n_in=0), [])[0]
    assert not np.array_equal(a, other)
    z = random_ops.RandomNormal().reference(
        node("RandomNormal", {"shape": (20000,), "seed": 1.0}, n_in=0), [])[0]
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03


def test_constant_strings_are_str_objects_and_ambiguity_is_refused() -> None:
    op = generators.Constant()
    (out,) = op.reference(node("Constant", {"value_strings": ("a", "b")}, n_in=0), [])
    assert out.dtype == object and out.tolist() == ["a", "b"]
    (info,) = op.infer(node("Constant", {"value_string": "a"}, n_in=0), [], [])
    assert info.dtype is DType.string and info.shape == ()
    with pytest.raises(InvalidModelError, match="exactly one"):
        op.infer(node("Constant", {"value_int": 1, "value_float": 2.0}, n_in=0), [], [])


def test_constant_of_shape_unknown_shape_is_host_only() -> None:
    op = generators.ConstantOfShape()
    n = node("ConstantOfShape")
    infos = [TensorInfo(DType.int64, (2,))]
    (out,) = op.infer(n, infos, [None])
    assert out.shape == (None, None)
    with pytest.raises(HostOnly):
        op.lower(n, infos, [out], [None])
    with pytest.raises(InvalidModelError, match="negative"):
        op.infer(n, infos, [np.array([2, -1], np.int64)])


def test_range_and_onehot_checks() -> None:
    r = generators.Range()
    f = TensorInfo(DType.float32, ())
    with pytest.raises(InvalidModelError, match="delta"):
        r.infer(node("Range", n_in=3), [f, f, f], [np.array(0.0), np.array(1.0), np.array(0.0)])
    assert r.infer(node("Range", n_in=3), [f, f, f], [None] * 3)[0].shape == (None,)
    o = generators.OneHot()
    i = TensorInfo(DType.int64, (2, 3))
    with pytest.raises(InvalidModelError, match="axis 3"):
        o.infer(node("OneHot", {"axis": 3}, n_in=3),
                [i, TensorInfo(DType.int64, ()), TensorInfo(DType.float32, (2,))],
                [None, np.array(4), None])


def test_dropout_training_is_refused_unless_ratio_zero() -> None:
    op = generators.Dropout()
    x = np.ones((2, 2), np.float32)
    n = node("Dropout", n_in=3, n_out=2, opset=13)
    with pytest.raises(UnsupportedOpError, match="training"):
        op.reference(n, [x, np.array(0.5, np.float32), np.array(True)])
    _, mask = op.reference(n, [x, np.array(0.0, np.float32), np.array(True)])
    assert mask.dtype == bool and mask.all()
    with pytest.raises(InvalidModelError, match="ratio"):
        op.infer(node("Dropout", {"ratio": 1.5}, opset=10), [TensorInfo(DType.float32, (2,))],
                 [None])


def test_eyelike_needs_2d() -> None:
    with pytest.raises(InvalidModelError, match="2-D"):
        generators.EyeLike().infer(node("EyeLike"), [TensorInfo(DType.float32, (2, 2, 2))],
                                   [None])
