"""KernelIR -> CUDA C++: a short subclass of the shared C-style renderer.

Compiled by NVRTC without any header (it has none of the toolkit's), so f16 is stored as
``unsigned short`` and converted with the PTX ``cvt`` instructions; arithmetic on f16 is done
in f32 and rounded on store and on every cast to f16. NVRTC has no math.h either, so NaN and
infinity are spelled as bit patterns.
"""

from __future__ import annotations

from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel.cstyle import GPU_C_MATH, CStyleRenderer, bitcasts
from spawnml.kernel.traits import TargetTraits
from spawnml.kernel.types import ScalarType as T

_HALF = """\
__device__ __forceinline__ float sp_h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short sp_f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}"""

TRAITS = TargetTraits(
    "cuda",
    intrinsics={**GPU_C_MATH, ("abs", "i32"): "abs({0})", ("abs", "i64"): "llabs({0})",
                ("round_f16", "f32"): "sp_h2f(sp_f2h({0}))"},
    f16_arithmetic=False,
    bitcasts={**bitcasts("(({dst})({0}))"),  # int <-> uint is a plain conversion
              (T.f32, T.i32): "__float_as_int({0})", (T.f32, T.u32): "__float_as_uint({0})",
              (T.i32, T.f32): "__int_as_float({0})", (T.u32, T.f32): "__uint_as_float({0})"},
    special_floats={"nan": "__uint_as_float(0x7fffffffu)", "inf": "__uint_as_float(0x7f800000u)",
                    "-inf": "__uint_as_float(0xff800000u)"},
)


class CUDARenderer(CStyleRenderer):
    """CUDA C++ for NVRTC: ``extern "C" __global__`` entry point, one thread per element."""

    name = "cuda"
    traits = TRAITS
    storage_names: ClassVar[dict[DType, str]] = {
        **CStyleRenderer.storage_names, DType.float16: "unsigned short",
    }
    kernel_prefix, restrict = 'extern "C" __global__ void', "__restrict__"
    function_prefix, gid_expr = "__device__ ", "(blockIdx.x * blockDim.x + threadIdx.x)"
    half_load, half_store = "sp_h2f({ptr}[{index}])", "{ptr}[{index}] = sp_f2h({value});"
    f16_helpers = _HALF
