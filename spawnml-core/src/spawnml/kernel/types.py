"""Scalar types of the kernel language and how tensor dtypes map onto them."""

from __future__ import annotations

import enum

import numpy as np

from ..dtypes import DType


class ScalarType(enum.Enum):
    """The types a kernel computes with. Storage dtypes map onto these (see ``compute_type``)."""

    bool = "bool"
    i32 = "i32"
    u32 = "u32"
    i64 = "i64"
    u64 = "u64"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"

    @property
    def is_float(self) -> bool:
        return self in (ScalarType.f16, ScalarType.bf16, ScalarType.f32)

    @property
    def is_int(self) -> bool:
        return self in (ScalarType.i32, ScalarType.u32, ScalarType.i64, ScalarType.u64)

    @property
    def is_signed(self) -> bool:
        return self in (ScalarType.i32, ScalarType.i64) or self.is_float

    @property
    def bits(self) -> int:
        return _BITS[self.value]

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY[self])

    def __repr__(self) -> str:
        return self.value

    __str__ = __repr__


_BITS = {"bool": 8, "i32": 32, "u32": 32, "i64": 64, "u64": 64, "f16": 16, "bf16": 16,
         "f32": 32}
# bf16 values are held in f32 wherever numpy computes with them (no target computes bf16:
# the core passes lower it to f32, rounding on casts and stores).
_NUMPY = {
    ScalarType.bool: "bool", ScalarType.i32: "int32", ScalarType.u32: "uint32",
    ScalarType.i64: "int64", ScalarType.u64: "uint64", ScalarType.f16: "float16",
    ScalarType.bf16: "float32", ScalarType.f32: "float32",
}

f32 = ScalarType.f32
f16 = ScalarType.f16
i32 = ScalarType.i32
u32 = ScalarType.u32
i64 = ScalarType.i64
u64 = ScalarType.u64
bf16 = ScalarType.bf16
boolean = ScalarType.bool

# Storage dtype -> the type a read produces. Narrow integers compute as i32; float64 is
# computed as f32 (documented in docs/kernels.md: kernels have no double precision).
_COMPUTE = {
    DType.float32: f32, DType.float16: f16, DType.bfloat16: bf16, DType.int32: i32,
    DType.uint32: u32, DType.int64: i64, DType.uint64: u64, DType.bool: boolean,
    DType.float64: f32, DType.int8: i32, DType.int16: i32, DType.uint8: i32, DType.uint16: i32,
}


def compute_type(dt: DType) -> ScalarType | None:
    """The kernel type of elements stored as ``dt`` (None: not usable in kernels)."""
    return _COMPUTE.get(dt)


def scalar_type_of(value: object) -> ScalarType | None:
    """Coerce a ScalarType, DType or numpy dtype into a ScalarType (None if impossible)."""
    if isinstance(value, ScalarType):
        return value
    if isinstance(value, DType):
        return compute_type(value)
    try:
        return compute_type(DType(np.dtype(value).name))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
