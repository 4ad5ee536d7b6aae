"""Element types: spawnml's DType and its mappings to numpy and ONNX TensorProto.

Besides the standard numpy types, DType names the narrow ONNX types (bfloat16, the float8
family, float4e2m1, int4/uint4, int2/uint2). numpy holds those through ``ml_dtypes``
(imported lazily, a dependency of onnx), one element per byte (sub-byte types unpacked).
The *exotic* ones (all but bfloat16) have no kernel type: ops compute them on the host.

``string`` is ONNX's STRING: numpy object arrays of Python ``str`` (as onnxruntime returns
them). No backend stores it: every op on strings runs on the host.
"""

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
    # Narrow ONNX types; the values are ml_dtypes' names (so numpy dtype names map back).
    float8_e4m3fn = "float8_e4m3fn"
    float8_e4m3fnuz = "float8_e4m3fnuz"
    float8_e5m2 = "float8_e5m2"
    float8_e5m2fnuz = "float8_e5m2fnuz"
    float8_e8m0fnu = "float8_e8m0fnu"
    float4_e2m1fn = "float4_e2m1fn"
    int4 = "int4"
    uint4 = "uint4"
    int2 = "int2"
    uint2 = "uint2"
    string = "string"
    """ONNX STRING: a numpy object array of ``str``; host-only (no device stores it)."""

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds this type on the host (ml_dtypes for narrow types)."""
        if self.value in _ML_DTYPES:
            return _ml_dtype(self.value)
        if self is DType.string:
            return np.dtype(object)
        return np.dtype(self.value)

    @property
    def itemsize(self) -> int:
        """Bytes per element in host memory (sub-byte types are unpacked: 1)."""
        return 2 if self is DType.bfloat16 else self.numpy.itemsize

    @property
    def bits(self) -> int:
        """Bits of one element as ONNX packs it (4 for int4, 2 for int2...)."""
        return _BITS.get(self.value, 8 * self.itemsize)

    @property
    def is_exotic(self) -> bool:
        """A narrow type (float8, float4, int4, int2...) that no kernel can compute with:
        ops on it run on the host with ml_dtypes arrays."""
        return self.value in _ML_DTYPES and self is not DType.bfloat16

    @property
    def is_string(self) -> bool:
        """ONNX STRING (object arrays of ``str``), which only the host computes with."""
        return self is DType.string

    @property
    def onnx(self) -> int:
        """The ONNX ``TensorProto.DataType`` code."""
        return _TO_ONNX[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_float8(self) -> bool:
        """One of the four float8 types with a sign (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz)."""
        return self in _FLOAT8

    @property
    def is_signed_int(self) -> bool:
        return self in (DType.int8, DType.int16, DType.int32, DType.int64, DType.int4,
                        DType.int2)

    @property
    def is_unsigned_int(self) -> bool:
        return self in (DType.uint8, DType.uint16, DType.uint32, DType.uint64, DType.uint4,
                        DType.uint2)

    @property
    def is_int(self) -> bool:
        return self.is_signed_int or self.is_unsigned_int

    @property
    def onnx_type_name(self) -> str:
        """The onnxruntime-style type string, e.g. ``tensor(float)``."""
        return f"tensor({_ONNX_NAMES[self]})"

    def __str__(self) -> str:
        return self.value


_FLOAT8 = frozenset({DType.float8_e4m3fn, DType.float8_e4m3fnuz, DType.float8_e5m2,
                     DType.float8_e5m2fnuz})
_FLOATS = frozenset({DType.float16, DType.float32, DType.float64, DType.bfloat16,
                     DType.float8_e8m0fnu, DType.float4_e2m1fn, *_FLOAT8})
# Types numpy holds through ml_dtypes (attribute names of the ml_dtypes module).
_ML_DTYPES = frozenset({"bfloat16", *(d.value for d in _FLOAT8), "float8_e8m0fnu",
                        "float4_e2m1fn", "int4", "uint4", "int2", "uint2"})
_BITS = {"float4_e2m1fn": 4, "int4": 4, "uint4": 4, "int2": 2, "uint2": 2}


def _ml_dtype(name: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
        raise InvalidInputError(f"{name} tensors need the ml_dtypes package") from None
    return np.dtype(getattr(ml_dtypes, name))


# TensorProto.DataType codes (stable across onnx versions).
_TO_ONNX = {
    DType.float32: 1, DType.uint8: 2, DType.int8: 3, DType.uint16: 4, DType.int16: 5,
    DType.int32: 6, DType.int64: 7, DType.bool: 9, DType.float16: 10, DType.float64: 11,
    DType.uint32: 12, DType.uint64: 13, DType.bfloat16: 16, DType.float8_e4m3fn: 17,
    DType.float8_e4m3fnuz: 18, DType.float8_e5m2: 19, DType.float8_e5m2fnuz: 20,
    DType.uint4: 21, DType.int4: 22, DType.float4_e2m1fn: 23, DType.float8_e8m0fnu: 24,
    DType.uint2: 25, DType.int2: 26, DType.string: 8,
}
_FROM_ONNX = {code: dt for dt, code in _TO_ONNX.items()}
# onnxruntime's type strings; lower-cased TensorProto names for the narrow types.
_ONNX_NAMES = {
    DType.float32: "float", DType.float16: "float16", DType.float64: "double",
    DType.bfloat16: "bfloat16", DType.int8: "int8", DType.int16: "int16", DType.int32: "int32",
    DType.int64: "int64", DType.uint8: "uint8", DType.uint16: "uint16", DType.uint32: "uint32",
    DType.uint64: "uint64", DType.bool: "bool", DType.float8_e4m3fn: "float8e4m3fn",
    DType.float8_e4m3fnuz: "float8e4m3fnuz", DType.float8_e5m2: "float8e5m2",
    DType.float8_e5m2fnuz: "float8e5m2fnuz", DType.float8_e8m0fnu: "float8e8m0",
    DType.float4_e2m1fn: "float4e2m1", DType.int4: "int4", DType.uint4: "uint4",
    DType.int2: "int2", DType.uint2: "uint2", DType.string: "string",
}
# Narrow types also answer to those ONNX names ("float8e4m3fn", "float4e2m1").
_ALIASES = {name: dt for dt, name in _ONNX_NAMES.items() if dt.value in _ML_DTYPES}


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
        if value in _ALIASES:
            return _ALIASES[value]
    try:
        np_dtype = np.dtype(value)  # type: ignore[call-overload]
        if np_dtype.kind in "OUS":  # object arrays of str, or fixed-width numpy strings
            return DType.string
        return DType(np_dtype.name)
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


def as_string_array(value: object, what: str = "tensor") -> np.ndarray:
    """``value`` as a STRING tensor: a numpy object array of ``str`` (numpy ``<U``/``S``
    arrays and ``bytes`` elements, decoded as UTF-8, are converted); anything else
    raises InvalidInputError naming ``what``."""
    array = np.asarray(value)
    if array.dtype.kind == "U":
        return array.astype(object)
    if array.dtype.kind not in "OS":
        raise InvalidInputError(f"{what}: expected strings, got dtype {array.dtype}")
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for i, item in enumerate(array.reshape(-1)):
        if isinstance(item, (bytes, np.bytes_)):
            try:
                item = bytes(item).decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(f"{what}: element {i} is not valid UTF-8") from None
        elif not isinstance(item, str):
            raise InvalidInputError(
                f"{what}: object arrays are not tensors unless they hold str (element {i} "
                f"is {type(item).__name__})")
        flat[i] = str(item)
    return out
