"""The write-once kernel language: Python functions -> typed IR -> every target.

See docs/kernels.md for the language reference.
"""

from .frontend import (
    Helper,
    Kernel,
    Output,
    Tensor,
    TensorSpec,
    bitcast,
    cast,
    cast_like,
    helper,
    kernel,
    static_range,
)
from .launch import run_kernel
from .types import ScalarType, bf16, boolean, f16, f32, i32, i64, u32, u64

__all__ = [
    "Helper",
    "Kernel",
    "Output",
    "Tensor",
    "TensorSpec",
    "ScalarType",
    "kernel",
    "helper",
    "run_kernel",
    "static_range",
    "cast",
    "cast_like",
    "bitcast",
    "f32",
    "f16",
    "i32",
    "u32",
    "i64",
    "u64",
    "bf16",
    "boolean",
]
