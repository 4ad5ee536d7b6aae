"""Cast, CastLike, QuantizeLinear and DequantizeLinear on the narrow element types (float8,
float8e8m0, float4e2m1, int4/uint4, int2/uint2, bfloat16): bit-exact against
onnx.reference (NaN equal to NaN), e8m0 against onnx.numpy_helper.to_float8e8m0, reads
against ml_dtypes; and the session runs them on the host, declared ("host", not a
fallback), from packed initializers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from spawnml import InferenceSession
from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError
from spawnml.op import HostOnly, Node, TensorInfo
from spawnml.registry import find_op
from spawnml_ops.exotic_cast import FLOAT8, QUANT_TYPES, to_e8m0

# onnx.reference and float16 outputs overflow on purpose (Inf/NaN cases are compared).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")

NARROW_FLOATS = [*sorted(FLOAT8, key=str), DType.float4_e2m1fn, DType.bfloat16]
NARROW_INTS = [DType.int4, DType.uint4, DType.int2, DType.uint2]
# Specials, overflow, underflow, ties of the narrow grids, and ordinary values.
SPECIAL = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e6, -1e6, 448.0, 464.0, 480.0,
                    57344.0, 61440.0, 240.0, 248.0, 1e-9, -1e-9, 0.25, 2.5, 3.0, -5.0,
                    0.0625, 1.0625, 1.125, 17.0, 7.5, -7.5, 0.75, 1.75, 5.0], np.float32)


def _sample(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.integers(-12, 16, 200)).astype(np.float32)
    return np.concatenate([SPECIAL, rng.standard_normal(200).astype(np.float32) * scale])


def _model(op_type: str, inputs: list[np.ndarray], attrs: dict, opset: int):
    names = [f"x{i}" for i in range(len(inputs))]
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in zip(names, inputs)]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    graph = helper.make_graph([node], "g", vis, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnx_reference(op_type: str, inputs: list[np.ndarray], attrs: dict, opset: int):
    model = _model(op_type, inputs, attrs, opset)
    return ReferenceEvaluator(model).run(None, {f"x{i}": a for i, a in enumerate(inputs)})[0]


def _ours(op_type: str, inputs: list[np.ndarray], attrs: dict, opset: int) -> np.ndarray:
    op = find_op("", op_type, opset)
    node = Node(op_type, [f"x{i}" for i in range(len(inputs))], ["y"], dict(attrs),
                opset=opset)
    infos = [TensorInfo(DType(a.dtype.name), a.shape) for a in inputs]
    (out,) = op.infer(node, infos, [None] * len(inputs))
    (y,) = op.reference(node, inputs)
    assert DType(y.dtype.name) is out.dtype
    return y


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype and shape; equal values, NaN equal to NaN, and the same sign of zero."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(g, w)  # treats NaN as equal to NaN
    np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


# --------------------------------------------------------------------------------- Cast


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("dst", NARROW_FLOATS, ids=str)
def test_cast_to_narrow_floats_matches_onnx_reference(dst: DType, src, saturate: int) -> None:
    with np.errstate(over="ignore"):
        x = _sample(1).astype(src)
    attrs = {"to": dst.onnx, "saturate": saturate}
    assert_same(_ours("Cast", [x], attrs, 25), _onnx_reference("Cast", [x], attrs, 25))


@pytest.mark.parametrize("dst", NARROW_INTS, ids=str)
@pytest.mark.parametrize("src", [np.float32, np.float16, np.int32, np.int8])
def test_cast_to_narrow_ints_matches_onnx_reference(dst: DType, src) -> None:
    x = np.arange(-12, 13).astype(src)
    attrs = {"to": dst.onnx}
    assert_same(_ours("Cast", [x], attrs, 25), _onnx_reference("Cast", [x], attrs, 25))


@pytest.mark.parametrize("src", [*NARROW_FLOATS, *NARROW_INTS, DType.float8_e8m0fnu], ids=str)
@pytest.mark.parametrize("dst", [DType.float32, DType.float16, DType.int8, DType.float8_e4m3fn,
                                 DType.int4, DType.bfloat16], ids=str)
def test_cast_from_narrow_types_reads_every_value(src: DType, dst: DType) -> None:
    # Every bit pattern of the source type; its float32 value is exact (ml_dtypes).
    lo, hi = (0, 255) if src.bits == 8 else (0, 2**src.bits - 1)
    if src is DType.bfloat16:
        x = np.arange(0, 65536, 7, dtype=np.uint16).view(ml_dtypes.bfloat16)
    else:
        x = np.arange(lo, hi + 1, dtype=np.uint8).view(src.numpy) if src.bits == 8 else \
            np.arange(lo, hi + 1).astype(np.int8).astype(src.numpy) if src.is_signed_int \
            or src.is_unsigned_int else np.arange(16, dtype=np.uint8).view(src.numpy)
    y = _ours("Cast", [x], {"to": dst.onnx}, 25)
    if dst.is_float and not dst.is_exotic:
        assert_same(y, x.astype(np.float32).astype(dst.numpy))
    else:  # to an int or narrow type: as onnx.reference casts
        assert_same(y, _onnx_reference("Cast", [x], {"to": dst.onnx}, 25))


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_e8m0_matches_onnx_numpy_helper(mode: str, saturate: int) -> None:
    # A stride through all float32 bit patterns, plus exponent edges and ties.
    bits = np.arange(0, 2**32, 65537, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x7F7FFFFF, 0x7F000000, 0x7F400000, 0x00400000, 0x00400001,
                      0x00000001, 0x3FC00000, 0x3FC00001, 0x7F800000, 0x7FC00000], np.uint32)
    x = np.concatenate([bits, edges]).view(np.float32)
    want = numpy_helper.to_float8e8m0(x, bool(saturate), mode)
    assert_same(to_e8m0(x, bool(saturate), mode), want)
    attrs = {"to": DType.float8_e8m0fnu.onnx, "saturate": saturate, "round_mode": mode}
    assert_same(_ours("Cast", [x.astype(np.float16)], attrs, 25),
                _onnx_reference("Cast", [x.astype(np.float16)], attrs, 25))


def test_castlike_takes_the_narrow_type_of_its_second_input() -> None:
    x = _sample(3)
    for dt in [*NARROW_FLOATS, *NARROW_INTS]:
        like = np.zeros((1,), dt.numpy)
        for sat in (0, 1):
            got = _ours("CastLike", [x, like], {"saturate": sat}, 25)
            assert_same(got, _onnx_reference("CastLike", [x, like], {"saturate": sat}, 25))


@pytest.mark.parametrize(("to", "since"), [(DType.float8_e4m3fn, 19), (DType.int4, 21),
                                           (DType.float4_e2m1fn, 23), (DType.uint2, 25),
                                           (DType.float8_e8m0fnu, 24)], ids=str)
def test_narrow_types_need_the_opset_that_added_them(to: DType, since: int) -> None:
    node = Node("Cast", ["x"], ["y"], {"to": to.onnx}, opset=since - 1)
    with pytest.raises(InvalidModelError, match=f"needs opset {since}"):
        find_op("", "Cast", since - 1).infer(node, [TensorInfo(DType.float32, (3,))], [None])
    node.opset = since
    find_op("", "Cast", since).infer(node, [TensorInfo(DType.float32, (3,))], [None])


# ------------------------------------------------------------------- Quantize/Dequantize


def _quant_params(dt: DType, shape: tuple[int, ...], axis: int, block: int):
    rng = np.random.default_rng(7)
    if block:
        pshape = list(shape)
        pshape[axis] = -(-shape[axis] // block)
    else:
        pshape = [shape[axis]]
    scale = rng.uniform(0.05, 2.0, pshape).astype(np.float32)
    if dt in FLOAT8 or dt is DType.float4_e2m1fn:
        zp = np.zeros(pshape, dt.numpy)
    else:
        lo, hi = {DType.int4: (-8, 7), DType.uint4: (0, 15), DType.int2: (-2, 1),
                  DType.uint2: (0, 3)}[dt]
        zp = rng.integers(lo, hi + 1, pshape).astype(np.int8).astype(dt.numpy)
    return scale, zp


LAYOUTS = [("per_tensor", 0, 0), ("per_axis", 1, 0), ("blocked", 1, 2)]


@pytest.mark.parametrize(("layout", "axis", "block"), LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("dt", sorted(QUANT_TYPES, key=str), ids=str)
def test_quantize_linear_matches_onnx_reference(dt: DType, layout: str, axis: int,
                                                block: int) -> None:
    x = (_sample(5)[:30] / 8).reshape(5, 6)
    scale, zp = _quant_params(dt, x.shape, axis, block)
    if layout == "per_tensor":
        scale, zp = scale[:1].reshape(()), zp[:1].reshape(())
    attrs = {"axis": axis, **({"block_size": block} if block else {})}
    inputs = [x, scale, zp]
    assert_same(_ours("QuantizeLinear", inputs, attrs, 25),
                _onnx_reference("QuantizeLinear", inputs, attrs, 25))
    if dt in FLOAT8:  # saturate=0 keeps out-of-range values as Inf/NaN
        sat = {**attrs, "saturate": 0}
        assert_same(_ours("QuantizeLinear", inputs, sat, 25),
                    _onnx_reference("QuantizeLinear", inputs, sat, 25))


@pytest.mark.parametrize(("layout", "axis", "block"), LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("dt", sorted(QUANT_TYPES, key=str), ids=str)
def test_dequantize_linear_matches_onnx_reference(dt: DType, layout: str, axis: int,
                                                  block: int) -> None:
    x = _ours("Cast", [(_sample(6)[:30] / 4).reshape(5, 6)], {"to": dt.onnx}, 25)
    scale, zp = _quant_params(dt, x.shape, axis, block)
    if layout == "per_tensor":
        scale, zp = scale[:1].reshape(()), zp[:1].reshape(())
    attrs = {"axis": axis, **({"block_size": block} if block else {})}
    for inputs in ([x, scale, zp], [x, scale.astype(np.float16), zp], [x, scale]):
        assert_same(_ours("DequantizeLinear", inputs, attrs, 25),
                    _onnx_reference("DequantizeLinear", inputs, attrs, 25))


def test_dequantize_rejects_a_nonzero_float8_zero_point() -> None:
    x = np.array([1.0, 2.0], ml_dtypes.float8_e4m3fn)
    with pytest.raises(InvalidModelError, match="zero point must be 0"):
        _ours("DequantizeLinear", [x, np.float32(1.0), np.array(1.0, x.dtype)], {}, 21)


def test_lowering_is_declared_host_only() -> None:
    f8 = TensorInfo(DType.float8_e4m3fn, (4,))
    f32 = TensorInfo(DType.float32, (4,))
    cases = [("Cast", {"to": 17}, [f32], f8), ("Cast", {"to": 1}, [f8], f32),
             ("QuantizeLinear", {}, [f32, TensorInfo(DType.float32, ()),
                                     TensorInfo(DType.float8_e4m3fn, ())], f8),
             ("DequantizeLinear", {}, [f8, TensorInfo(DType.float32, ())], f32)]
    for op_type, attrs, ins, out in cases:
        node = Node(op_type, [f"x{i}" for i in range(len(ins))], ["y"], attrs, opset=25)
        with pytest.raises(HostOnly, match="float8_e4m3fn"):
            find_op("", op_type, 25).lower(node, ins, [out], [None] * len(ins))


# ------------------------------------------------------------------------------ session


def test_session_runs_narrow_casts_on_the_host_from_packed_initializers() -> None:
    """x -> float8 -> float32, plus DequantizeLinear of a packed int4 initializer."""
    q = np.array([[-8, -3, 0, 7, 5]], ml_dtypes.int4)
    init = numpy_helper.from_array(q, "q")  # packed two per byte in the TensorProto
    assert len(init.raw_data) == 3
    nodes = [
        helper.make_node("Cast", ["x"], ["f8"], to=TensorProto.FLOAT8E4M3FN, name="to_f8"),
        helper.make_node("Cast", ["f8"], ["y"], to=TensorProto.FLOAT, name="back"),
        helper.make_node("DequantizeLinear", ["q", "s"], ["dq"], name="dq"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5]),
                     helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5]),
         helper.make_tensor_value_info("f8", TensorProto.FLOAT8E4M3FN, [1, 5]),
         helper.make_tensor_value_info("dq", TensorProto.FLOAT, [1, 5])], [init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([[0.3, 500.0, -np.inf, np.nan, 17.0]], np.float32)
    s = np.array(0.5, np.float32)
    sess = InferenceSession(model.SerializeToString(), backends=["cpu"], strict=True)
    y, f8, dq = sess.run(None, {"x": x, "s": s})
    want_f8 = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert_same(f8, want_f8)
    assert_same(y, want_f8.astype(np.float32))
    np.testing.assert_array_equal(dq, q.astype(np.float32) * 0.5)
    placement = sess.placement()
    assert placement.kinds["to_f8"] == placement.kinds["back"] == "host"
    assert "float8_e4m3fn" in placement.reasons["to_f8"]
    assert sess.get_outputs()[1].type == "tensor(float8e4m3fn)"


def test_session_accepts_narrow_feeds_and_checks_their_type() -> None:
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT2, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    sess = InferenceSession(model, backends=["cpu"])
    (y,) = sess.run(None, {"x": np.array([0, 1, 2, 3], ml_dtypes.uint2)})
    np.testing.assert_array_equal(y, np.array([0, 1, 2, 3], np.float16))
    from spawnml.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="tensor\\(uint2\\)"):
        sess.run(None, {"x": np.array([0, 1, 2, 3], ml_dtypes.int2)})
