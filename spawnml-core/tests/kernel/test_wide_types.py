"""uint64 and bfloat16 as kernel element types on every available backend.

uint64 computes natively (unsigned) where a target has 64-bit integers (cpu, OpenCL, CUDA,
Wasm) and as u32 elsewhere, whose uploads refuse values beyond uint32. bfloat16 is computed
as f32 and rounded to nearest-even on casts and stores, as ml_dtypes rounds; it is stored as
its 16 bits (uint16 words) or as f32. References: numpy uint64 and ml_dtypes. Tolerances:
uint64 and every bfloat16 rounding exact (bit for bit, NaN equal to NaN); a bfloat16 result
of several f32 operations within one bfloat16 ulp (2**-7 relative: a target may contract
``a * b + c`` into an fma, which can round to the other neighbour).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from spawnml import get_available_backends, get_backend
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, KernelCompileError
from spawnml.kernel import Output, Tensor, cast, f32, ir, kernel, run_kernel
from spawnml.kernel.passes import lower
from spawnml.kernel.traits import TargetTraits
from spawnml.kernel.types import ScalarType
from spawnml.testing import suite_kernels as K

BF16 = np.dtype(ml_dtypes.bfloat16)
BACKENDS = [b for b in ("cpu", "wasm", "opencl", "webgpu", "webgl")
            if b in get_available_backends()]


def _int64_native(name: str) -> bool:
    return DType.uint64 in get_backend(name).capabilities.dtypes


NATIVE_64 = [b for b in BACKENDS if _int64_native(b)]
NARROW_64 = [b for b in BACKENDS if not _int64_native(b)]


@kernel
def u64_mixed(a: Tensor, b: Tensor, out: Output):
    """max, min, a subtraction that cannot wrap and a shift by a run-time amount."""
    x = a.flat[out.flat]
    y = b.flat[out.flat]
    return max(x, y) - min(x, y) + (x >> (y & 63))


@kernel
def u64_less(a: Tensor, b: Tensor, out: Output):
    return a.flat[out.flat] < b.flat[out.flat]


@kernel
def u64_to_f32(a: Tensor, out: Output):
    return cast(a.flat[out.flat], f32)


@kernel
def u64_big_constant(a: Tensor, out: Output):
    return a.flat[out.flat] + 5000000000


@kernel
def to_bf16(x: Tensor, out: Output):
    return cast(x.flat[out.flat], out.dtype)


@kernel
def bf16_to_f32(x: Tensor, out: Output):
    return cast(x.flat[out.flat], f32)


@kernel
def bf16_fma(a: Tensor, b: Tensor, c: Tensor, out: Output):
    i = out.flat
    return a.flat[i] * b.flat[i] + c.flat[i]


def _sign(y: np.ndarray) -> np.ndarray:
    return (y > 0).astype(np.uint64)


_U64_REFERENCE = {  # suite_kernels.int_binary's operations on uint64 (x // 0 == x % 0 == 0)
    0: lambda x, y: np.where(y == 0, 0, x // np.where(y == 0, 1, y)),
    1: lambda x, y: np.where(y == 0, 0, x % np.where(y == 0, 1, y)),
    2: lambda x, y: np.where(y == 0, 0, x // np.where(y == 0, 1, y)),
    3: lambda x, y: np.where(y == 0, 0, x % np.where(y == 0, 1, y)),
    4: lambda x, y: (x & y) | (x ^ np.uint64(7)),
    5: lambda x, y: (x << np.uint64(3)) >> np.uint64(1),
    6: lambda x, y: ~x,
    7: lambda x, y: x + _sign(y),
    "mixed": lambda x, y: np.maximum(x, y) - np.minimum(x, y) + (x >> (y & np.uint64(63))),
}


def _u64_pair(big: bool) -> tuple[np.ndarray, np.ndarray]:
    """Operands with values at and above 2**63 (``big``), or within uint32."""
    if big:
        a = [2**64 - 1, 2**63 + 5, 3, 0, 2**63, 7, 2**40 + 3, 9]
        b = [2, 2**63, 2**63 + 1, 5, 0, 1, 3, 2**64 - 1]
    else:
        a = [4_000_000_000, 2**31 + 5, 3, 0, 2**31, 7, 65_536 * 3, 9]
        b = [2, 2**31, 2**31 + 1, 5, 0, 1, 3, 4_000_000_001]
    return np.array(a, np.uint64), np.array(b, np.uint64)


def _check_u64(backend_name: str, op: int | str, a: np.ndarray, b: np.ndarray) -> None:
    """``op`` (an int_binary operation, or ``"mixed"``) on ``backend_name`` vs numpy uint64."""
    backend = get_backend(backend_name)
    if op == "mixed":
        got = run_kernel(backend, u64_mixed, [a, b], a.shape, "uint64")
    else:
        got = run_kernel(backend, K.int_binary, [a, b], a.shape, "uint64", op=op)
    with np.errstate(all="ignore"):
        expected = _U64_REFERENCE[op](a, b).astype(np.uint64)
    np.testing.assert_array_equal(got, expected, err_msg=f"uint64 op {op} on {backend_name}")


_OPS = list(_U64_REFERENCE)


@pytest.mark.parametrize("op", _OPS)
@pytest.mark.parametrize("backend_name", NATIVE_64)
def test_uint64_unsigned_above_2_63(backend_name: str, op: int | str) -> None:
    _check_u64(backend_name, op, *_u64_pair(big=True))


@pytest.mark.parametrize("op", [op for op in _OPS if op != 6])  # ~x never fits 32 bits
@pytest.mark.parametrize("backend_name", NARROW_64)
def test_uint64_within_uint32_on_32_bit_targets(backend_name: str, op: int | str) -> None:
    """Targets without 64-bit integers compute uint64 as u32: exact while results fit
    (uploads check the inputs, not the results) and shifts stay below 32."""
    a, b = _u64_pair(big=False)
    if op in (5, 7, "mixed"):
        a = a % np.uint64(1000)
    if op == "mixed":
        b = b % np.uint64(13)
    _check_u64(backend_name, op, a, b)


@pytest.mark.parametrize("backend_name", NARROW_64)
def test_uint64_beyond_uint32_raises_on_32_bit_targets(backend_name: str) -> None:
    a = np.array([1, 2**32], np.uint64)
    with pytest.raises(InvalidInputError, match=r"stores uint64 as uint32.*outside the uint32"):
        run_kernel(get_backend(backend_name), u64_less, [a, a], a.shape, "bool")


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_uint64_to_float(backend_name: str) -> None:
    big = backend_name in NATIVE_64
    a = np.array([0, 3, 4_000_000_000] + ([2**64 - 2**40, 2**63 + 2**40] if big else []),
                 np.uint64)
    got = run_kernel(get_backend(backend_name), u64_to_f32, [a], a.shape, "float32")
    np.testing.assert_array_equal(got, a.astype(np.float32))


def test_uint64_constant_beyond_uint32_is_refused_where_declared() -> None:
    k = u64_big_constant.specialize([((2,), "uint64")], ((2,), "uint64"))
    assert any(c.type == ScalarType.u64 for c in _consts(k))
    with pytest.raises(KernelCompileError, match="5000000000 does not fit the uint32"):
        lower(k, TargetTraits("t", int64=False, int64_constants="error"))


def _consts(k: ir.KernelIR) -> list[ir.Const]:
    return [e for e in ir.all_exprs(k.body) if isinstance(e, ir.Const)]


def test_uint64_saturating_constant_is_u32() -> None:
    k = u64_big_constant.specialize([((2,), "uint64")], ((2,), "uint64"))
    lowered = lower(k, TargetTraits("t", int64=False))
    types = {c.type for c in _consts(lowered)}
    assert ScalarType.u64 not in types and ScalarType.u32 in types
    assert max(c.value for c in _consts(lowered) if c.type == ScalarType.u32) == 2**32 - 1


def _rounding_inputs() -> np.ndarray:
    """f32 values at the bfloat16 rounding boundaries: ties (to even both ways), just past
    ties, overflow to inf, the largest bfloat16, signed zeros, NaN, inf, subnormals."""
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)
    values = [
        one + ulp / 2,  # tie: stays 1.0 (even)
        one + ulp * 1.5,  # tie: rounds up to 1 + 2 ulp (even)
        one + ulp / 2 + np.float32(2.0**-20),  # past the tie: up
        -(one + ulp * 1.5),
        np.float32(3.3895314e38),  # the largest bfloat16
        np.float32(3.4e38),  # beyond: inf
        -np.float32(3.4e38),
        0.0, -0.0, np.inf, -np.inf, np.nan,
        np.float32(1e-40), np.float32(-3e-39),  # subnormal
        np.float32(0.1), np.float32(-123.456), np.float32(65504.0),
    ]
    return np.array(values, np.float32)


def _subnormal_free(backend_name: str, x: np.ndarray) -> np.ndarray:
    if not get_backend(backend_name).capabilities.extras.get("flushes_denormals"):
        return x
    tiny = np.finfo(np.float32).tiny
    return x[(x == 0) | ~(np.abs(x) < tiny)]


def _assert_same_bf16(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == BF16, got.dtype
    g, e = got.view(np.uint16), expected.view(np.uint16)
    nan = np.isnan(expected.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(g[~nan], e[~nan])


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_bf16_rounds_to_nearest_even_like_ml_dtypes(backend_name: str) -> None:
    x = _subnormal_free(backend_name, _rounding_inputs())
    got = run_kernel(get_backend(backend_name), to_bf16, [x], x.shape, "bfloat16")
    _assert_same_bf16(got, x.astype(BF16))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_bf16_reads_exactly(backend_name: str) -> None:
    x = _subnormal_free(backend_name, _rounding_inputs()).astype(BF16)
    got = run_kernel(get_backend(backend_name), bf16_to_f32, [x], x.shape, "float32")
    np.testing.assert_array_equal(got, x.astype(np.float32))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_bf16_computes_in_f32_and_rounds_on_store(backend_name: str) -> None:
    r = np.random.default_rng(3)
    a, b, c = (r.uniform(-8, 8, 64).astype(BF16) for _ in range(3))
    got = run_kernel(get_backend(backend_name), bf16_fma, [a, b, c], a.shape, "bfloat16")
    f = [v.astype(np.float32) for v in (a, b, c)]
    expected = (f[0] * f[1] + f[2]).astype(BF16)
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32),
                               rtol=2**-7, atol=2**-7)
    assert np.mean(got == expected) > 0.9  # f32 math then one rounding, not bf16 math


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_bf16_storage_round_trip(backend_name: str) -> None:
    """Uploads and downloads keep every bfloat16 bit pattern (16-bit or f32 storage)."""
    backend = get_backend(backend_name)
    x = _subnormal_free(backend_name, _rounding_inputs()).astype(BF16)
    buf = backend.upload(x)
    try:
        _assert_same_bf16(backend.download(buf, x.shape, "bfloat16"), x)
    finally:
        backend.free(buf)
    assert backend.storage_dtype(DType.bfloat16) in (DType.uint16, DType.float32)
