"""Float reductions as interleaved partial results (spawnml.kernel.partial_sums): which loops
qualify, and a split kernel computing the sum in its documented fixed order (bit for bit),
max/min exactly, on every backend here; on the cpu, whatever the launch split."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import get_available_backends, get_backend
from spawnml.kernel import Output, Tensor, cast, f32, ir, kernel
from spawnml.kernel.partial_sums import split_reductions

F32 = "float32"


@kernel
def row_sum(x: Tensor, out: Output):
    r = out.index[0]
    s = 0.0
    for k in range(x.shape[1]):
        s = s + x[r, k]
    return s


@kernel
def row_sum_f32(x: Tensor, out: Output):
    r = out.index[0]
    s = 0.0
    for k in range(x.shape[1]):
        s = s + cast(x[r, k], f32)
    return cast(s, out.dtype)


@kernel
def row_max_min(x: Tensor, out: Output):
    """max of the row in column 0, min in column 1 (both loops split)."""
    r, c = out.index
    m = -float("inf")
    for k in range(x.shape[1]):
        m = max(m, x[r, k])
    n = float("inf")
    for k in range(x.shape[1]):
        n = min(x[r, k], n)
    return m if c == 0 else n


@kernel
def row_mean_var(x: Tensor, out: Output):
    """Temporaries assigned twice per trip, two accumulators in one loop."""
    r, c = out.index
    s = 0.0
    q = 0.0
    for k in range(x.shape[1]):
        i = r * x.shape[1]
        i = i + k
        v = x.flat[i]
        s = s + v
        q = q + v * v
    mean = s / x.shape[1]
    return mean if c == 0 else q / x.shape[1] - mean * mean


@kernel
def carried(x: Tensor, out: Output):
    """``prev`` is read before this trip assigns it: carried between trips, not split."""
    r = out.index[0]
    s = 0.0
    prev = 0.0
    for k in range(x.shape[1]):
        s = s + x[r, k] * prev
        prev = x[r, k]
    return s


@kernel
def acc_read_twice(x: Tensor, out: Output):
    r = out.index[0]
    s = 0.0
    t = 0.0
    for k in range(x.shape[1]):
        s = s + x[r, k]
        t = t + s
    return t


@kernel
def branchy(x: Tensor, out: Output):
    r = out.index[0]
    s = 0.0
    for k in range(x.shape[1]):
        if x[r, k] > 0.0:
            s = s + x[r, k]
    return s


def _loops(k: ir.KernelIR) -> list[ir.For]:
    return [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)]


def _spec(k, shape, out_shape, dtype=F32):
    return k.specialize([(shape, dtype)], (out_shape, dtype))


def test_a_sum_loop_gets_lane_groups_and_a_remainder():
    spec = _spec(row_sum, (3, 37), (3,))
    split = split_reductions(spec, 8)
    steps = sorted(s.step for s in _loops(split))
    assert steps == [1, 8]  # the main loop by 8 lanes, the 37 % 8 = 5 remainder in order
    assert any(len(g) == 8 and all(n.startswith("v_s") for n in g) for g in split.lane_groups)


@pytest.mark.parametrize("k,shape,out_shape", [
    (carried, (2, 64), (2,)),
    (acc_read_twice, (2, 64), (2,)),
    (branchy, (2, 64), (2,)),
    (row_sum, (2, 15), (2,)),  # fewer than 2 x 8 trips
])
def test_loops_that_do_not_qualify_are_left_alone(k, shape, out_shape):
    spec = _spec(k, shape, out_shape)
    assert split_reductions(spec, 8) is spec


def test_sixteen_bit_kernels_keep_their_sums_in_order():
    spec = _spec(row_sum_f32, (2, 64), (2,), "float16")
    assert split_reductions(_spec(row_sum_f32, (2, 64), (2,)), 8) is not spec
    assert split_reductions(spec, 8) is spec


def _fixed_order_sum(row: np.ndarray, lanes: int) -> np.float32:
    """The documented order in float32: lane j sums k = j, j + L, ...; lanes pairwise; then
    the remainder in order."""
    main = len(row) // lanes * lanes
    parts = [np.float32(0.0)] + [np.float32(-0.0)] * (lanes - 1)  # s = 0.0; identities
    for k0 in range(0, main, lanes):
        for j in range(lanes):
            parts[j] = np.float32(parts[j] + row[k0 + j])
    while len(parts) > 1:
        pairs = [np.float32(parts[i] + parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    total = parts[0]
    for k in range(main, len(row)):
        total = np.float32(total + row[k])
    return total


def _run(backend, spec: ir.KernelIR, x: np.ndarray) -> np.ndarray:
    backend = get_backend(backend) if isinstance(backend, str) else backend
    program = backend.compile(spec)
    buf = backend.upload(x)
    out = backend.alloc(spec.output.size * 4)
    try:
        backend.launch(program, out, [buf])
        return backend.download(out, spec.output.shape, spec.output.dtype)
    finally:
        backend.free(buf)
        backend.free(out)


BACKENDS = [b for b in ("cpu", "opencl", "wasm", "webgpu", "webgl")
            if b in get_available_backends()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_split_kernel_computes_the_documented_order_on_every_backend(backend):
    """Split by hand with 8 lanes (what the cpu asks for is its own vector width), then
    compiled as each backend compiles any kernel: the sum is the fixed order's, bit for bit;
    max, min, mean and variance match numpy."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 203)) * 1e3).astype(np.float32)
    x[1, :] = -0.0
    x[2, 17] = np.inf
    got = _run(backend, split_reductions(_spec(row_sum, x.shape, (5,)), 8), x)
    want = np.array([_fixed_order_sum(r, 8) for r in x], np.float32)
    np.testing.assert_array_equal(got, want)

    x[3, 5] = np.nan
    got = _run(backend, split_reductions(_spec(row_max_min, x.shape, (5, 2)), 8), x)
    np.testing.assert_array_equal(got, np.stack([x.max(1), x.min(1)], 1))

    y = rng.standard_normal((4, 1000)).astype(np.float32)
    got = _run(backend, split_reductions(_spec(row_mean_var, y.shape, (4, 2)), 8), y)
    want = np.stack([y.astype(np.float64).mean(1), y.astype(np.float64).var(1)], 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif("cpu" not in get_available_backends(), reason="no cpu backend")
def test_the_cpu_splits_by_itself_and_its_bits_do_not_depend_on_threads():
    from spawnml_backend_cpu import CPUBackend

    rng = np.random.default_rng(4)
    x = rng.standard_normal((67, 3001)).astype(np.float32)
    spec = _spec(row_sum, x.shape, (67,))
    results = []
    for threads in (1, 2, 3):  # three launch splits of the 67 rows
        backend = CPUBackend(threads=threads)
        if not backend.jit:
            pytest.skip("the native executor is off here")
        results.append(_run(backend, spec, x))
        lanes = backend.reduction_lanes
    assert lanes >= 8
    want = np.array([_fixed_order_sum(r, lanes) for r in x], np.float32)
    for got in results:
        np.testing.assert_array_equal(got, want)


def test_the_split_is_off_with_the_switch(monkeypatch):
    from spawnml.kernel.schedule import schedule

    spec = _spec(row_sum, (3, 64), (3,))
    assert any(s.step == 8 for s in _loops(schedule(spec, reduction_lanes=8)))
    monkeypatch.setenv("SPAWNML_PARTIAL_SUMS", "0")
    assert all(s.step == 1 for s in _loops(schedule(spec, reduction_lanes=8)))


def test_partial_sums_keep_lane_names_unique():
    spec = _spec(row_max_min, (2, 64), (2, 2))
    split = split_reductions(spec, 4)
    names = [v.name for v in split.locals]
    assert len(names) == len(set(names))
    assert {n for g in split.lane_groups for n in g} <= set(names)
