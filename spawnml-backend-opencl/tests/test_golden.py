"""Rendered OpenCL C of representative kernels, compared with tests/golden/*.cl.

A renderer change that alters the source fails here so the diff gets reviewed. To accept
new output: ``SPAWNML_UPDATE_GOLDEN=1 pytest spawnml-backend-opencl/tests/test_golden.py``.
The renderer is built without a device (PoCL's capabilities: no cl_khr_fp16), and every
golden source is also built and run on the real device when one is present.
"""

# ruff: noqa: F821  (intrinsics such as isnan are resolved by the kernel front end)
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from spawnml.backend import Backend
from spawnml.kernel import Output, Tensor, cast, f16, f32, helper, kernel, static_range
from spawnml_backend_opencl.backend import _DTYPES, OpenCLBackend
from spawnml_backend_opencl.renderer import OpenCLRenderer

GOLDEN = Path(__file__).parent / "golden"


@helper
def broadcast_offset(x, out):
    off = 0
    for d in static_range(x.ndim):
        od = d + out.ndim - x.ndim
        if x.shape[d] != 1:
            off = off + out.index[od] * x.strides[d]
    return off


@kernel
def add_broadcast(a: Tensor, b: Tensor, out: Output):
    return a.flat[broadcast_offset(a, out)] + b.flat[broadcast_offset(b, out)]


@kernel
def sum_rows(x: Tensor, out: Output):
    (r,) = out.index
    acc = cast(0.0, x.dtype)
    for k in range(x.shape[1]):
        acc += x[r, k]
    return acc


@kernel
def leaky_clip(x: Tensor, out: Output, alpha: float, limit: float):
    v = x.flat[out.flat]
    if v > limit:
        return limit
    if v > 0.0:
        y = v
    else:
        y = v * alpha
    return y


@kernel
def int_divmod(a: Tensor, b: Tensor, out: Output):
    x = a.flat[out.flat]
    y = b.flat[out.flat]
    return x // y * 100 + x % y


@kernel
def special_values(x: Tensor, out: Output):
    v = cast(x.flat[out.flat], f32)
    if isnan(v):
        return cast(math.inf, f16)
    return cast(-math.inf if v < 0.0 else (float("nan") if v == 0.0 else v), f16)


CASES = {  # name -> (kernel, inputs (shape, dtype), output (shape, dtype), constants)
    "add_broadcast": (
        add_broadcast, [((2, 3), "float32"), ((3,), "float32")], ((2, 3), "float32"), {}
    ),
    "sum_rows": (sum_rows, [((4, 5), "float32")], ((4,), "float32"), {}),
    "leaky_clip": (
        leaky_clip, [((16,), "float32")], ((16,), "float32"), {"alpha": 0.1, "limit": 6.0}
    ),
    "int_divmod": (int_divmod, [((8,), "int32"), ((8,), "int32")], ((8,), "int32"), {}),
    "special_values": (special_values, [((8,), "int64")], ((8,), "float16"), {}),
}


class _NoDevice:
    """What Backend.storage_dtype reads, for rendering without a device."""

    name = "opencl"
    capabilities = type("C", (), {"dtypes": _DTYPES})()


def _render(name: str) -> str:
    k, ins, out, consts = CASES[name]
    spec = k.specialize(ins, out, **consts)
    renderer = OpenCLRenderer(lambda dt: Backend.storage_dtype(_NoDevice(), dt), fp16=False)
    text = renderer.render(spec)
    # The first line names the kernel's file, which differs between checkouts.
    return text.split("\n", 1)[1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_source_matches_golden(name: str) -> None:
    path = GOLDEN / f"{name}.cl"
    text = _render(name)
    if os.environ.get("SPAWNML_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with SPAWNML_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"rendered OpenCL C of {name} differs from {path}; review the diff and regenerate "
        "with SPAWNML_UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_source_builds_on_the_device(name: str, opencl: OpenCLBackend) -> None:
    k, ins, out, consts = CASES[name]
    spec = k.specialize(ins, out, **consts)
    source = (GOLDEN / f"{name}.cl").read_text(encoding="utf-8")
    program = opencl.program_from_source(source, f"k_{spec.name}", spec.size, len(spec.inputs))
    assert program.global_size[0] >= spec.size
