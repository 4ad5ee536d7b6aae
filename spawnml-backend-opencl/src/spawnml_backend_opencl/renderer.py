"""KernelIR -> OpenCL C 1.2: a short subclass of the shared C-style renderer."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.cstyle import CStyleRenderer
from spawnml.kernel.types import ScalarType

# Rounds an f32 to f16 precision with the core (extension-free) half load/store builtins:
# without cl_khr_fp16 `half` may only be pointed to, so the bits go through a ushort.
_ROUND_F16 = """\
inline float sp_round_f16(float x) {
    ushort h;
    vstore_half_rte(x, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
}"""


class OpenCLRenderer(CStyleRenderer):
    """OpenCL C. With ``fp16`` the device has cl_khr_fp16 and computes in ``half``;
    without it f16 is stored as ``half`` (vload_half/vstore_half) and computed as f32."""

    name = "opencl"
    type_names: ClassVar[dict[ScalarType, str]] = {
        ScalarType.bool: "bool", ScalarType.i32: "int", ScalarType.u32: "uint",
        ScalarType.i64: "long", ScalarType.f16: "half", ScalarType.f32: "float",
    }
    storage_names: ClassVar[dict[DType, str]] = {
        DType.float32: "float", DType.float16: "half", DType.int32: "int", DType.uint32: "uint",
        DType.int64: "long", DType.int8: "char", DType.uint8: "uchar", DType.int16: "short",
        DType.uint16: "ushort",
    }
    intrinsics: ClassVar[dict[str, str]] = {
        **CStyleRenderer.intrinsics,
        "rsqrt": "rsqrt({0})", "erf": "erf({0})", "fmod": "fmod({0}, {1})",
        "round": "rint({0})",  # OpenCL round() is half away from zero; rint is half to even
    }
    typed_intrinsics: ClassVar[dict[tuple[str, str], str]] = {
        ("abs", "float"): "fabs({0})",
        ("abs", "signed"): "(({t})abs({0}))",  # abs(int) returns uint in OpenCL C
        ("abs", "unsigned"): "{0}",
        ("min", "int"): "min({0}, {1})", ("max", "int"): "max({0}, {1})",
        ("isnan", "float"): "isnan({0})", ("isinf", "float"): "isinf({0})",
        ("isfinite", "float"): "isfinite({0})",
        # min/max of floats (NaN must propagate: fmin/fmax drop it), sign (OpenCL's is 0 for
        # NaN), floordiv/floormod/truncdiv/truncmod (0 and -1 divisors) and pymod come from
        # the kernel-language polyfills.
    }

    def __init__(
        self, storage_dtype: Callable[[DType], DType], *, fp16: bool = False
    ) -> None:
        super().__init__(storage_dtype)
        self.f16_arithmetic = fp16

    def int_literal(self, v: int, t: ScalarType) -> str:
        if t == ScalarType.i64:  # OpenCL C spells a long literal with L, not LL
            return f"{v}L" if v != -(2**63) else "(-9223372036854775807L - 1)"
        return super().int_literal(v, t)

    def bitcast_text(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return f"as_{self.type_name(dst)}({x})"

    def round_f16(self, x: str) -> str:
        return f"sp_round_f16({x})"

    def load(self, k: ir.KernelIR, buffer: int, index: str, t: ScalarType) -> str:
        if self.storage_dtype(k.inputs[buffer].dtype) is DType.float16 and not self.f16_arithmetic:
            return f"vload_half({index}, {self.input_name(k, buffer)})"
        return super().load(k, buffer, index, t)

    def store(self, k: ir.KernelIR, value: str, t: ScalarType) -> str:
        if self.storage_dtype(k.output.dtype) is DType.float16 and not self.f16_arithmetic:
            return f"vstore_half_rte({value}, {self.gid_name}, {self.out_name});"
        return super().store(k, value, t)

    def render(self, k: ir.KernelIR) -> str:
        lines = []
        if self.uses_f16(k):
            if self.f16_arithmetic:
                lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
            else:
                lines.append(_ROUND_F16)
        self.prelude = "\n".join(lines)
        return super().render(k)

    def kernel_header(self, k: ir.KernelIR) -> list[str]:
        out = f"__global {self.storage_name(k.output.dtype)} *restrict {self.out_name}"
        ins = [
            f"__global const {self.storage_name(b.dtype)} *restrict {self.input_name(k, i)}"
            for i, b in enumerate(k.inputs)
        ]
        return [f"__kernel void {kernel_name(k)}({', '.join([out, *ins])}) {{"]

    def kernel_prologue(self, k: ir.KernelIR) -> list[str]:
        # The unsigned bound tells the compiler 0 <= gid < size, so index math by constants
        # becomes shifts and masks and PoCL vectorises it (10x on a broadcast add).
        return [f"int {self.gid_name} = (int)get_global_id(0);",
                f"if ((uint){self.gid_name} >= {k.size}u) return;"]


def kernel_name(k: ir.KernelIR) -> str:
    """The entry point's name; prefixed so a kernel called ``exp`` cannot shadow a builtin."""
    return f"k_{k.name}"
