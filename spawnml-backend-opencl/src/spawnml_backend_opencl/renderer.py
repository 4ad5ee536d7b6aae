"""KernelIR -> OpenCL C 1.2: a short subclass of the shared C-style renderer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel.cstyle import GPU_C_MATH, CStyleRenderer, bitcasts
from spawnml.kernel.traits import TargetTraits
from spawnml.kernel.types import ScalarType

# Rounds an f32 to f16 precision with the core (extension-free) half load/store builtins:
# without cl_khr_fp16 `half` may only be pointed to, so the bits go through a ushort.
_ROUND_F16 = """\
inline float sp_round_f16(float x) {
    ushort h;
    vstore_half_rte(x, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
}"""

# OpenCL allows tanh a few ulps and PoCL's does not saturate: tanh(-inf) = -0.99999994, so
# 1 + tanh(x) is 6e-8 instead of 0 (GELU's tanh form then gives -inf, not NaN, at -inf).
# The kernel-language polyfill saturates exactly (kernel suite: tanh_saturates_exactly).
_INEXACT = {"tanh"}

TRAITS = TargetTraits(
    "opencl",
    intrinsics={**{k: v for k, v in GPU_C_MATH.items() if k[0] not in _INEXACT},
                ("abs", "signed"): "(({t})abs({0}))",  # abs(int) is uint in C
                ("round_f16", "f32"): "sp_round_f16({0})"},
    bitcasts=bitcasts("as_{dst}({0})"),
    vector_width=4,
)


class OpenCLRenderer(CStyleRenderer):
    """OpenCL C. With ``fp16`` the device has cl_khr_fp16 and computes in ``half``;
    without it f16 is stored as ``half`` (vload_half/vstore_half) and computed as f32."""

    name = "opencl"
    type_names: ClassVar[dict[ScalarType, str]] = {
        **CStyleRenderer.type_names, ScalarType.u32: "uint", ScalarType.i64: "long",
        ScalarType.u64: "ulong",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        **CStyleRenderer.storage_names, DType.uint32: "uint", DType.int64: "long",
        DType.uint64: "ulong",
        DType.int8: "char", DType.uint8: "uchar", DType.uint16: "ushort",
    }
    i64_suffix, u64_suffix = "L", "UL"
    kernel_prefix, buffer_prefix, gid_expr = "__kernel void", "__global ", "get_global_id(0)"
    half_load = "vload_half({index}, {ptr})"
    half_store = "vstore_half_rte({value}, {index}, {ptr});"
    f16_extension, f16_helpers = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable", _ROUND_F16

    def __init__(self, storage_dtype: Callable[[DType], DType], *, fp16: bool = False) -> None:
        super().__init__(storage_dtype)
        self.traits = dataclasses.replace(TRAITS, f16_arithmetic=fp16)
