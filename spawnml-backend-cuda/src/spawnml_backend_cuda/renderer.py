"""KernelIR -> CUDA C++: a short subclass of the shared C-style renderer.

Compiled by NVRTC without any header (it has none of the toolkit's), so f16 is stored as
``unsigned short`` and converted with the PTX ``cvt`` instructions; arithmetic on f16 is done
in f32 and rounded on store and on every cast to f16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.cstyle import CStyleRenderer
from spawnml.kernel.types import ScalarType

_HALF = """\
__device__ __forceinline__ float sp_h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short sp_f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}"""
_BITCAST = {  # (source, target) -> device intrinsic; int<->uint is a plain conversion
    (ScalarType.f32, ScalarType.i32): "__float_as_int",
    (ScalarType.f32, ScalarType.u32): "__float_as_uint",
    (ScalarType.i32, ScalarType.f32): "__int_as_float",
    (ScalarType.u32, ScalarType.f32): "__uint_as_float",
}


class CUDARenderer(CStyleRenderer):
    """CUDA C++ for NVRTC: ``extern "C" __global__`` entry point, one thread per element."""

    name = "cuda"
    storage_names: ClassVar[dict[DType, str]] = {
        **CStyleRenderer.storage_names, DType.float16: "unsigned short",
    }
    intrinsics: ClassVar[dict[str, str]] = {
        **CStyleRenderer.intrinsics,
        "rsqrt": "rsqrt({0})", "erf": "erf({0})", "fmod": "fmod({0}, {1})", "round": "rint({0})",
    }
    typed_intrinsics: ClassVar[dict[tuple[str, str], str]] = {
        ("abs", "float"): "fabs({0})", ("abs", "i32"): "abs({0})", ("abs", "i64"): "llabs({0})",
        ("abs", "unsigned"): "{0}",
        ("min", "int"): "min({0}, {1})", ("max", "int"): "max({0}, {1})",
        ("isnan", "float"): "isnan({0})", ("isinf", "float"): "isinf({0})",
        ("isfinite", "float"): "isfinite({0})",
        # float min/max (fminf/fmaxf drop NaN), sign, integer floordiv/floormod/truncdiv/
        # truncmod (0 and -1 divisors) and pymod come from the kernel-language polyfills.
    }
    f16_arithmetic = False

    def __init__(self, storage_dtype: Callable[[DType], DType]) -> None:
        super().__init__(storage_dtype)

    def special_float(self, which: str, t: ScalarType) -> str:
        # NVRTC has no math.h, so no NAN/INFINITY macros: spell the bit patterns.
        bits = {"nan": "0x7fffffffu", "inf": "0x7f800000u", "-inf": "0xff800000u"}[which]
        return f"__uint_as_float({bits})"

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        fn = _BITCAST.get((src, dst))
        return f"{fn}({x})" if fn else self.cast_text(x, src, dst)

    def round_f16(self, x: str) -> str:
        return f"sp_h2f(sp_f2h({x}))"

    def from_storage(self, text: str, storage: DType, t: ScalarType) -> str:
        if storage is DType.float16:
            return f"sp_h2f({text})"
        return super().from_storage(text, storage, t)

    def to_storage(self, value: str, t: ScalarType, storage: DType) -> str:
        if storage is DType.float16:
            return f"sp_f2h({value})"
        return super().to_storage(value, t, storage)

    def render(self, k: ir.KernelIR) -> str:
        self.prelude = _HALF if self.uses_f16(k) else ""
        return super().render(k)

    def function_header(self, f: ir.Function) -> str:
        return "__device__ " + super().function_header(f)

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        out = f"{self.storage_name(k.output.dtype)} *__restrict__ {self.out_name}"
        ins = [
            f"const {self.storage_name(b.dtype)} *__restrict__ {self.input_name(k, i)}"
            for i, b in enumerate(k.inputs)
        ]
        return [f'extern "C" __global__ void {kernel_name(k)}({", ".join([out, *ins])}) {{']

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        return [f"int {self.gid_name} = (int)(blockIdx.x * blockDim.x + threadIdx.x);",
                f"if ((unsigned int){self.gid_name} >= {k.size}u) return;"]  # 0 <= gid


def kernel_name(k: ir.KernelIR) -> str:
    """The entry point's name; prefixed so a kernel called ``exp`` cannot shadow a builtin."""
    return f"k_{k.name}"
