"""WebGL2 limits: texture size (rows wrap), texture units (inputs packed), 32-bit types."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.errors import InvalidInputError, KernelCompileError, OutOfMemoryError
from spawnml.kernel import Output, Tensor, cast, f16, kernel, run_kernel
from spawnml_backend_webgl import WebGLBackend


@kernel
def sum5(a: Tensor, b: Tensor, c: Tensor, d: Tensor, e: Tensor, out: Output):
    i = out.flat
    return a.flat[i] + b.flat[i] * 2.0 + c.flat[i] * 4.0 + d.flat[i] * 8.0 + e.flat[i] * 16.0


@kernel
def reverse(x: Tensor, out: Output):
    return x.flat[x.size - 1 - out.flat]


@kernel
def to_f16(x: Tensor, out: Output):
    return cast(x.flat[out.flat], f16)


@kernel
def add_offset(x: Tensor, out: Output, offset: int = 0):
    return x.flat[out.flat] + offset


def _backend(**limits: int) -> WebGLBackend:
    info = WebGLBackend.probe()
    if not info.available:
        pytest.skip(info.reason)
    return WebGLBackend(**limits)


@pytest.fixture(scope="module")
def narrow() -> WebGLBackend:
    """Rows of 16 texels: a 20,000-element tensor spans 1,250 rows."""
    return _backend(texture_width=16)


def _all_bit_patterns(n: int) -> np.ndarray:
    bits = np.random.default_rng(7).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bits[:4] = [0x7FC00001, 0xFFFFFFFF, 0x80000000, 0x00000001]  # NaN payloads, -0, subnormal
    return bits.view(np.float32)


@pytest.mark.parametrize("n", [4096 * 3 + 17, 20_000])
def test_long_tensors_wrap_rows_and_round_trip_exactly(backend, narrow, n) -> None:
    for be in (backend, narrow):
        assert n > be.layout.width  # more elements than one texture row holds
        x = _all_bit_patterns(n)
        buf = be.upload(x)
        got = be.download(buf, x.shape, "float32")
        be.free(buf)
        np.testing.assert_array_equal(got.view(np.uint32), x.view(np.uint32))


def test_more_elements_than_a_texture_side_run_through_a_kernel(narrow) -> None:
    x = np.arange(20_000, dtype=np.int32)  # 20,000 > 16,384 (MAX_TEXTURE_SIZE): must wrap
    np.testing.assert_array_equal(run_kernel(narrow, reverse, [x], x.shape, "int32"), x[::-1])


def test_a_buffer_beyond_one_texture_is_refused(narrow) -> None:
    with pytest.raises(OutOfMemoryError, match="exceeds this device's limit"):
        narrow.alloc(narrow.capabilities.max_buffer_bytes + 4)


@pytest.mark.parametrize("units", [1, 2, 4])
def test_kernels_with_more_inputs_than_texture_units_are_packed(units) -> None:
    be = _backend(max_texture_units=units)
    rng = np.random.default_rng(units)
    shapes = [(300,), (300,), (7, 300), (300,), (300,)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    spec = sum5.specialize(arrays, ((300,), "float32"))
    program = be.compile(spec)
    assert len(program.plan.direct) == min(units - 1, 4) and program.plan.packed
    assert program.source.count("uniform highp usampler2D") <= units
    got = run_kernel(be, sum5, arrays, (300,), "float32")
    a, b, c, d, e = (x.reshape(-1) for x in arrays)
    want = a + b * 2 + c[:300] * 4 + d * 8 + e * 16
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    be.close()


def test_output_that_is_also_an_input(backend) -> None:
    """Sampling the texture being rendered into is undefined in GL: the backend renders
    into a fresh texture and swaps it in."""
    x = np.arange(5000, dtype=np.float32)
    spec = add_offset.specialize([x], ((5000,), "float32"), offset=1)
    buf = backend.upload(x)
    program = backend.compile(spec)
    backend.launch(program, buf, [buf])
    backend.launch(program, buf, [buf])
    np.testing.assert_array_equal(backend.download(buf, x.shape, "float32"), x + 2)
    backend.free(buf)


def test_float16_rounds_to_nearest_even_through_pack_half(backend) -> None:
    """Every f32 bit pattern class against numpy's float16 conversion (ties, subnormals,
    overflow to inf)."""
    x = _all_bit_patterns(200_000)
    x = x[np.isfinite(x)]
    edges = np.array([65504, 65519.99, 65520, 1e6, -1e6, 6e-8, 3e-8, 2.98e-8, -0.0,
                      np.inf, -np.inf, 1 + 2**-11, 1 + 3 * 2**-11], np.float32)
    x = np.concatenate([x, edges, np.float32(1e-5) * np.arange(-5000, 5000, dtype=np.float32)])
    got = run_kernel(backend, to_f16, [x], x.shape, "float16")
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_int64_is_lowered_to_int32_with_a_range_check(backend) -> None:
    x = np.array([-(2**31), 0, 2**31 - 1], np.int64)
    np.testing.assert_array_equal(run_kernel(backend, add_offset, [x], (3,), "int64"), x)
    with pytest.raises(InvalidInputError, match="outside the int32 range"):
        backend.upload(np.array([2**31], np.int64))
    spec = add_offset.specialize([x], ((3,), "int64"), offset=2**40)
    with pytest.raises(KernelCompileError, match="no 64-bit integers"):
        backend.compile(spec)


def test_bool_int8_and_uint32_round_trip(backend) -> None:
    for x in (np.array([True, False, True]), np.array([-128, 0, 127], np.int8),
              np.array([0, 2**32 - 1, 7], np.uint32)):
        buf = backend.upload(x)
        np.testing.assert_array_equal(backend.download(buf, x.shape, x.dtype), x)
        backend.free(buf)


def test_dump_kernels_writes_glsl(backend, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_DUMP_KERNELS", str(tmp_path))
    x = np.arange(3, dtype=np.float32)
    run_kernel(backend, add_offset, [x], (3,), "float32", offset=5)
    (path,) = (tmp_path / "webgl").glob("add_offset-*.frag")
    assert path.read_text().startswith("#version 300 es\n")
