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
    DType.uint64: "UINT64", DType.bool: "BOOL",
}  # fmt: skip


@pytest.mark.parametrize("dt", list(DType), ids=str)
def test_onnx_code_matches_tensorproto(dt: DType) -> None:
    assert dt.onnx == getattr(TensorProto, ONNX_NAME[dt])
    assert from_onnx(dt.onnx) is dt
    assert dtype(dt.onnx) is dt


@pytest.mark.parametrize("dt", [d for d in DType if d is not DType.bfloat16], ids=str)
def test_numpy_round_trip_agrees_with_onnx(dt: DType) -> None:
    assert from_numpy(dt.numpy) is dt
    assert dtype(dt.numpy.type) is dt  # the scalar type, e.g. np.float32
    assert dtype(dt.value) is dt
    assert dt.itemsize == dt.numpy.itemsize
    assert helper.tensor_dtype_to_np_dtype(dt.onnx) == dt.numpy


def test_bfloat16_has_no_numpy_type_but_a_size() -> None:
    assert DType.bfloat16.itemsize == 2
    with pytest.raises(InvalidInputError, match="bfloat16"):
        _ = DType.bfloat16.numpy


def test_onnx_type_names_follow_onnxruntime() -> None:
    assert DType.float32.onnx_type_name == "tensor(float)"
    assert DType.float64.onnx_type_name == "tensor(double)"
    assert DType.int64.onnx_type_name == "tensor(int64)"


def test_kind_predicates_partition_the_types() -> None:
    for dt in DType:
        kinds = [dt.is_float, dt.is_signed_int, dt.is_unsigned_int, dt is DType.bool]
        assert sum(kinds) == 1, dt
        assert dt.is_int == (dt.is_signed_int or dt.is_unsigned_int)


@pytest.mark.parametrize(
    "bad", [TensorProto.STRING, TensorProto.COMPLEX64, 999, "float128x", np.dtype("U3"), True]
)
def test_unsupported_types_raise_a_spawnml_error(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        dtype(bad)
    assert issubclass(InvalidInputError, SpawnMLError)
