"""Register tiles (spawnml.kernel.tile): the block chosen from the kernel's reuse, and a tiled
kernel computing exactly what the gather kernel computes, on every rendering backend here.

The class under test is "a kernel whose copies disagree somewhere": loop bounds, branch
conditions and loads that depend on a tiled axis, extents the tile does not divide, early
returns, ``out.flat``, narrow and float16 outputs. Each is run tiled and untiled on real
backends and compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import get_available_backends, get_backend
from spawnml.kernel import Output, Tensor, cast, f32, ir, kernel, static_range
from spawnml.kernel.tile import plan_tile, reuse_axes, tile_kernel

TILED = [b for b in ("opencl", "wasm", "webgpu") if b in get_available_backends()]


@kernel
def matmul(a: Tensor, b: Tensor, out: Output):
    i, j = out.index
    acc = 0.0
    for k in range(a.shape[1]):
        acc = acc + a[i, k] * b[k, j]
    return acc


@kernel
def triangular(a: Tensor, b: Tensor, out: Output):
    """Loop bounds and a branch that depend on the output index (copies cannot jam)."""
    i, j = out.index
    acc = 0.0
    for k in range(j + 1):
        if k % 2 == i % 2:
            acc = acc + a[i, k] * b[k, j]
        else:
            acc = acc - a[i, k]
    return acc + cast(out.flat, f32)


@kernel
def loop_var_in_a_lane_branch(a: Tensor, out: Output):
    """A loop variable also looped over under a condition that differs between copies: the
    shared loop must set every copy's name for it."""
    i, j = out.index
    acc = 0.0
    for k in range(3):
        acc = acc + a[i, j + k]
    if a[i, j] > 0.0:
        for k in range(2):
            acc = acc + cast(k, f32) * 2.0
    return acc


@kernel
def early_exit(a: Tensor, out: Output):
    i, j = out.index
    if j == 0:
        return 0.0
    acc = 0.0
    for k in range(a.shape[1]):
        acc = acc + a[i, k]
    return acc


@kernel
def elementwise(a: Tensor, out: Output):
    return a.flat[out.flat] * 2.0


@kernel
def conv2d(x: Tensor, w: Tensor, out: Output, pad: int, stride: int):
    co, oy, ox = out.index
    acc = 0.0
    for ci in range(x.shape[0]):
        for ky in range(w.shape[2]):
            for kx in range(w.shape[3]):
                wv = w[co, ci, ky, kx]
                iy = oy * stride - pad + ky
                ix = ox * stride - pad + kx
                if 0 <= iy < x.shape[1] and 0 <= ix < x.shape[2]:
                    acc = acc + x[ci, iy, ix] * wv
    return acc


@kernel
def rowsum_int(a: Tensor, out: Output):
    i, j = out.index
    acc = 0
    for k in range(a.shape[1]):
        acc = acc + a[i, k] * (j + 1)
    return acc


@kernel
def batched(a: Tensor, b: Tensor, out: Output):
    n, i, j = out.index
    acc = 0.0
    for k in static_range(3):
        acc = acc + a[n, i, k] * b[n, k, j]
    for k in range(3, a.shape[2]):
        acc = acc + a[n, i, k] * b[n, k, j]
    return cast(acc, out.dtype)


def _ref_triangular(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, n = a.shape[0], b.shape[1]
    out = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0)
            for k in range(j + 1):
                acc = acc + a[i, k] * b[k, j] if k % 2 == i % 2 else acc - a[i, k]
            out[i, j] = acc + np.float32(i * n + j)
    return out


def _ref_conv(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    _, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((m, oh, ow), np.float32)
    for y in range(oh):
        for z in range(ow):
            patch = xp[:, y * stride:y * stride + kh, z * stride:z * stride + kw]
            out[:, y, z] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2]))
    return out


def _run(backend_name: str, k, spec: ir.KernelIR, arrays: list[np.ndarray]) -> np.ndarray:
    backend = get_backend(backend_name)
    program = backend.compile(spec)
    buffers = [backend.upload(a) for a in arrays]
    nbytes = spec.output.size * backend.storage_dtype(spec.output.dtype).itemsize
    out = backend.alloc(nbytes)
    try:
        backend.launch(program, out, buffers)
        return backend.download(out, spec.output.shape, spec.output.dtype)
    finally:
        backend.free(out)
        for b in buffers:
            backend.free(b)


rng = np.random.default_rng(7)
A = rng.standard_normal((13, 10)).astype(np.float32)
B = rng.standard_normal((10, 11)).astype(np.float32)
B10 = np.ascontiguousarray(B[:, :10])
X = rng.standard_normal((3, 9, 7)).astype(np.float32)
W = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
AI = rng.integers(-50, 50, (9, 7)).astype(np.int32)
A3 = rng.standard_normal((2, 5, 7)).astype(np.float32)
B3 = rng.standard_normal((2, 7, 6)).astype(np.float32)

CASES = {
    "matmul": (matmul, [A, B], ((13, 11), "float32"), {}, lambda: A @ B),
    "triangular": (triangular, [A, B10], ((13, 10), "float32"), {},
                   lambda: _ref_triangular(A, B10)),
    "conv_pad": (conv2d, [X, W], ((6, 9, 7), "float32"), {"pad": 1, "stride": 1},
                 lambda: _ref_conv(X, W, 1, 1)),
    "conv_stride": (conv2d, [X, W], ((6, 4, 3), "float32"), {"pad": 0, "stride": 2},
                    lambda: _ref_conv(X, W, 0, 2)),
    "loop_var_in_a_lane_branch": (
        loop_var_in_a_lane_branch, [A], ((13, 8), "float32"), {},
        lambda: sum(A[:, k:k + 8] for k in range(3)) + 2.0 * (A[:, :8] > 0)),
    "int": (rowsum_int, [AI], ((9, 5), "int32"), {},
            lambda: AI.sum(1, keepdims=True) * np.arange(1, 6, dtype=np.int32)),
    "int8_out": (rowsum_int, [AI], ((9, 5), "int8"), {},
                 lambda: (AI.sum(1, keepdims=True) * np.arange(1, 6)).astype(np.int8)),
    "f16_out": (batched, [A3, B3], ((2, 5, 6), "float16"), {},
                lambda: (A3 @ B3).astype(np.float16)),
}


def _spec(name: str) -> tuple[object, ir.KernelIR, list[np.ndarray], np.ndarray]:
    k, arrays, out, consts, ref = CASES[name]
    inputs = [(a.shape, str(a.dtype)) for a in arrays]
    return k, k.specialize(inputs, out, **consts), arrays, ref()


@pytest.mark.parametrize("backend_name", TILED)
@pytest.mark.parametrize("tile,interleave", [
    ((4, 4), False), ((3, 5), False), ((1, 8), False), ((16, 1), False), ((2, 2, 2), False),
    ((4, 4), True), ((3, 5), True), ((1, 1, 4), True),
])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tiled_kernel_matches_the_gather_kernel(backend_name, tile, interleave, case):
    k, spec, arrays, ref = _spec(case)
    tile = (tile + (1,) * 3)[: len(spec.output.shape)]
    if max(tile) == 1:
        pytest.skip("the tile is one element for this rank")
    tiled = tile_kernel(spec, tile, interleave)
    assert tiled.tile and tiled.size < spec.size  # it really is tiled
    assert sum(isinstance(s, ir.Store) for s in ir.walk_stmts(tiled.body)) >= 2
    plain = _run(backend_name, k, spec, arrays)
    got = _run(backend_name, k, tiled, arrays)
    if ref.dtype.kind == "f":
        tol = 1e-2 if ref.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float32), plain.astype(np.float32),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32),
                                   rtol=tol, atol=tol * 10)
    else:
        np.testing.assert_array_equal(got, plain)
        np.testing.assert_array_equal(got, ref)


def test_a_kernel_with_an_early_return_is_left_untiled():
    spec = early_exit.specialize([((8, 8), "float32")], ((8, 8), "float32"))
    assert tile_kernel(spec, (4, 4)) is spec
    assert plan_tile(spec, 16) is None


def test_an_elementwise_kernel_buys_no_reuse_and_is_not_tiled():
    spec = elementwise.specialize([((64, 64), "float32")], ((64, 64), "float32"))
    assert reuse_axes(spec) == []
    assert plan_tile(spec, 16) is None


def test_the_plan_tiles_the_axes_that_share_loads():
    mm = matmul.specialize([((64, 32), "float32"), ((32, 64), "float32")],
                           ((64, 64), "float32"))
    assert reuse_axes(mm) == [1, 0]
    assert plan_tile(mm, 16) == (4, 4)
    assert plan_tile(mm, 4) == (1, 4)
    assert plan_tile(mm, 1) is None
    conv = conv2d.specialize([((8, 16, 16), "float32"), ((32, 8, 3, 3), "float32")],
                             ((32, 16, 16), "float32"), pad=1, stride=1)
    # channels share the input, columns share the weight: 8 loads per 16 outputs beats
    # the 17 of a 4 x 4 spatial block
    assert plan_tile(conv, 16) == (4, 1, 4)


def test_a_tiled_matmul_loads_each_operand_once_per_row_and_column():
    spec = matmul.specialize([((64, 32), "float32"), ((32, 64), "float32")],
                             ((64, 64), "float32"))
    tiled = tile_kernel(spec, (4, 4))
    (loop,) = [s for s in ir.walk_stmts(tiled.body) if isinstance(s, ir.For)]
    loads = [e for e in ir.all_exprs(loop.body) if isinstance(e, ir.Load)]
    assert len(loads) == 8  # 4 of a's column + 4 of b's row feed 16 accumulators
    assert tiled.size == 16 * 16


def test_the_cuda_compile_check_compiles_the_tiled_kernel():
    """What NVRTC checks is what a GPU would run: the scheduled (tiled) kernel."""
    cuda = pytest.importorskip("spawnml_backend_cuda.backend")
    pytest.importorskip("cuda.bindings.nvrtc", reason="no NVRTC (pip cuda-python) here")
    spec = matmul.specialize([((64, 32), "float32"), ((32, 64), "float32")],
                             ((64, 64), "float32"))
    ptx = cuda.compile_check(spec)
    assert ptx.count("st.global.f32") == 16  # one store per element of the 4 x 4 block


@kernel
def long_branchy_loop(a: Tensor, out: Output):
    i, j = out.index
    acc = 0.0
    if j % 2 == 0:
        for k in range(20000):
            acc = acc + a[i, k % 8]
    return acc


@pytest.mark.skipif("webgpu" not in get_available_backends(), reason="no webgpu backend")
def test_a_tile_over_the_loop_limit_falls_back_to_one_output_per_invocation():
    """Copies that cannot share a loop repeat it; where the device's loop limit (lavapipe's
    65,535 iterations) refuses the tiled kernel, the untiled one still runs."""
    from spawnml.kernel import run_kernel
    from spawnml.kernel.analysis import loop_iterations

    backend = get_backend("webgpu")
    limit = backend.capabilities.extras["max_loop_iterations"]
    a = rng.standard_normal((8, 8)).astype(np.float32)
    spec = long_branchy_loop.specialize([a], ((8, 64), "float32"))
    tiled = tile_kernel(spec, plan_tile(spec, 16, min_invocations=1) or (1, 4))
    assert loop_iterations(tiled.body) > limit >= loop_iterations(spec.body)
    got = run_kernel(backend, long_branchy_loop, [a], (8, 64), "float32")
    want = np.where(np.arange(64) % 2 == 0, 2500.0 * a.sum(1, keepdims=True), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-3)


@pytest.mark.parametrize("backend_name", TILED)
def test_the_tuner_measures_each_schedule_once_and_keeps_the_choice(
    backend_name, monkeypatch, tmp_path
):
    from spawnml.kernel import run_kernel, tune

    monkeypatch.setenv("SPAWNML_TUNE", "1")
    monkeypatch.setenv("SPAWNML_CACHE_DIR", str(tmp_path))
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 64)).astype(np.float32)
    spec = matmul.specialize([a, b], ((64, 64), "float32"))
    backend = get_backend(backend_name)
    variants = tune.candidates(backend, spec)
    assert len(variants) >= 3 and () in variants  # 16, 8, 4 outputs and untiled
    timed: list[tuple[int, ...]] = []
    real = tune._time
    monkeypatch.setattr(tune, "_time", lambda be, p, k: timed.append(k.tile) or real(be, p, k))
    for _ in range(2):
        backend.__dict__.pop("_programs", None)  # a new process: only the disk remembers
        got = run_kernel(backend, matmul, [a, b], (64, 64), "float32")
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    assert sorted(timed) == sorted(variants)  # measured once each, on the first compile
    (chosen,) = list((tmp_path / "kernels" / backend_name).glob("*.tile"))
    assert tuple(int(t) for t in chosen.read_text().split("x") if t) in variants


def test_the_tile_budget_follows_spawnml_tile(monkeypatch):
    from spawnml.errors import InvalidInputError
    from spawnml.kernel.tile import tile_budget

    for value, want in (("0", 1), ("1", 16), ("8", 8), ("64", 16)):
        monkeypatch.setenv("SPAWNML_TILE", value)
        assert tile_budget(16) == want
    monkeypatch.setenv("SPAWNML_TILE", "lots")
    with pytest.raises(InvalidInputError, match="SPAWNML_TILE must be"):
        tile_budget(16)
