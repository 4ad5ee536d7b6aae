"""DType ↔ numpy ↔ ONNX mappings, checked against onnx's own tables."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from spawnml.dtypes import DType, dtype, from_numpy, from_onnx
from spawnml.errors import InvalidInputError, SpawnMLError

ONNX_NAME = {
    DType.float32: "FLOAT", DType.float16: "FLOAT16", DType.float64: "DOUBLE",
    DType.bfloat16: "BFLOAT16", DType.int8: "INT8", DType.int16: "INT16", DType.int32: "INT32",
    DType.int64: "INT64", DType.uint8: "UINT8", DType.uint16: "UINT16", DType.uint32: "UINT32",
    DType.uint64: "UINT64", DType.bool: "BOOL", DType.float8_e4m3fn: "FLOAT8E4M3FN",
    DType.float8_e4m3fnuz: "FLOAT8E4M3FNUZ", DType.float8_e5m2: "FLOAT8E5M2",
    DType.float8_e5m2fnuz: "FLOAT8E5M2FNUZ", DType.float8_e8m0fnu: "FLOAT8E8M0",
    DType.float4_e2m1fn: "FLOAT4E2M1", DType.int4: "INT4", DType.uint4: "UINT4",
    DType.int2: "INT2", DType.uint2: "UINT2", DType.string: "STRING",
}  # fmt: skip
NARROW = [DType.float8_e4m3fn, DType.float8_e4m3fnuz, DType.float8_e5m2, DType.float8_e5m2fnuz,
          DType.float8_e8m0fnu, DType.float4_e2m1fn, DType.int4, DType.uint4, DType.int2,
          DType.uint2]


@pytest.mark.parametrize("dt", list(DType), ids=str)
def test_onnx_code_matches_tensorproto(dt: DType) -> None:
    assert dt.onnx == getattr(TensorProto, ONNX_NAME[dt])
    assert from_onnx(dt.onnx) is dt
    assert dtype(dt.onnx) is dt


@pytest.mark.parametrize("dt", list(DType), ids=str)
def test_numpy_round_trip_agrees_with_onnx(dt: DType) -> None:
    assert from_numpy(dt.numpy) is dt
    assert dtype(dt.numpy.type) is dt  # the scalar type, e.g. np.float32
    assert dtype(dt.value) is dt
    assert dt.itemsize == dt.numpy.itemsize
    assert helper.tensor_dtype_to_np_dtype(dt.onnx) == dt.numpy


def test_bfloat16_is_held_by_ml_dtypes() -> None:
    import ml_dtypes

    assert DType.bfloat16.itemsize == 2
    assert DType.bfloat16.numpy == np.dtype(ml_dtypes.bfloat16)
    assert not DType.bfloat16.is_exotic


@pytest.mark.parametrize("dt", NARROW, ids=str)
def test_narrow_types_are_exotic_ml_dtypes(dt: DType) -> None:
    """Held unpacked (one byte per element), ``bits`` as ONNX packs them, no kernel type."""
    from spawnml.kernel.types import compute_type

    assert dt.is_exotic and compute_type(dt) is None
    assert dt.itemsize == 1
    assert dt.bits == {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2,
                       "float4_e2m1fn": 4}.get(dt.value, 8)
    # onnxruntime's type string, also accepted as a name
    name = dt.onnx_type_name.removeprefix("tensor(").removesuffix(")")
    assert name == ONNX_NAME[dt].lower()
    assert dtype(name) is dt
    assert dt.is_float8 == (dt.value.startswith("float8") and dt is not DType.float8_e8m0fnu)


def test_numpy_names_keep_their_meaning() -> None:
    assert dtype("float") is DType.float64  # numpy's "float", not ONNX's
    assert dtype("double") is DType.float64
    assert not any(d.is_exotic for d in (DType.float32, DType.int8, DType.bfloat16))


def test_onnx_type_names_follow_onnxruntime() -> None:
    assert DType.float32.onnx_type_name == "tensor(float)"
    assert DType.float64.onnx_type_name == "tensor(double)"
    assert DType.int64.onnx_type_name == "tensor(int64)"


def test_kind_predicates_partition_the_types() -> None:
    for dt in DType:
        kinds = [dt.is_float, dt.is_signed_int, dt.is_unsigned_int, dt is DType.bool,
                 dt.is_string]
        assert sum(kinds) == 1, dt
        assert dt.is_int == (dt.is_signed_int or dt.is_unsigned_int)


@pytest.mark.parametrize(
    "bad", [TensorProto.COMPLEX64, 999, "float128x", np.dtype("c8"), True]
)
def test_unsupported_types_raise_a_spawnml_error(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        dtype(bad)
    assert issubclass(InvalidInputError, SpawnMLError)
