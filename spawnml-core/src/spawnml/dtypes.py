"""Element types: spawnml's DType and its mappings to numpy and ONNX TensorProto."""

from __future__ import annotations

import enum

import numpy as np

from .errors import InvalidInputError


class DType(enum.Enum):
    """A tensor element type. The value is the canonical short name."""

    float32 = "float32"
    float16 = "float16"
    float64 = "float64"
    bfloat16 = "bfloat16"
    int8 = "int8"
    int16 = "int16"
    int32 = "int32"
    int64 = "int64"
    uint8 = "uint8"
    uint16 = "uint16"
    uint32 = "uint32"
    uint64 = "uint64"
    bool = "bool"

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds this type on the host."""
        if self is DType.bfloat16:
            raise InvalidInputError("bfloat16 has no numpy equivalent; convert to float32 first")
        return np.dtype(self.value)

    @property
    def itemsize(self) -> int:
        return 2 if self is DType.bfloat16 else self.numpy.itemsize

    @property
    def onnx(self) -> int:
        """The ONNX ``TensorProto.DataType`` code."""
        return _TO_ONNX[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.float16, DType.float32, DType.float64, DType.bfloat16)

    @property
    def is_signed_int(self) -> bool:
        return self in (DType.int8, DType.int16, DType.int32, DType.int64)

    @property
    def is_unsigned_int(self) -> bool:
        return self in (DType.uint8, DType.uint16, DType.uint32, DType.uint64)

    @property
    def is_int(self) -> bool:
        return self.is_signed_int or self.is_unsigned_int

    @property
    def onnx_type_name(self) -> str:
        """The onnxruntime-style type string, e.g. ``tensor(float)``."""
        return f"tensor({_ONNX_NAMES[self]})"

    def __str__(self) -> str:
        return self.value


# TensorProto.DataType codes (stable across onnx versions).
_TO_ONNX = {
    DType.float32: 1, DType.uint8: 2, DType.int8: 3, DType.uint16: 4, DType.int16: 5,
    DType.int32: 6, DType.int64: 7, DType.bool: 9, DType.float16: 10, DType.float64: 11,
    DType.uint32: 12, DType.uint64: 13, DType.bfloat16: 16,
}
_FROM_ONNX = {code: dt for dt, code in _TO_ONNX.items()}
_ONNX_NAMES = {
    DType.float32: "float", DType.float16: "float16", DType.float64: "double",
    DType.bfloat16: "bfloat16", DType.int8: "int8", DType.int16: "int16", DType.int32: "int32",
    DType.int64: "int64", DType.uint8: "uint8", DType.uint16: "uint16", DType.uint32: "uint32",
    DType.uint64: "uint64", DType.bool: "bool",
}


def dtype(value: object) -> DType:
    """Coerce a DType, numpy dtype, type name or ONNX code into a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return _FROM_ONNX[value]
        except KeyError:
            raise InvalidInputError(f"unsupported ONNX element type code {value}") from None
    if isinstance(value, str):
        try:
            return DType(value)
        except ValueError:
            pass
    try:
        return DType(np.dtype(value).name)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"unsupported dtype {value!r}; expected one of {[d.value for d in DType]}"
        ) from None


def from_onnx(code: int) -> DType:
    """The DType of an ONNX ``TensorProto.DataType`` code."""
    return dtype(code)


def from_numpy(np_dtype: np.dtype | type) -> DType:
    """The DType of a numpy dtype."""
    return dtype(np_dtype)
