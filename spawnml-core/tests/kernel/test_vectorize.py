"""Vectors from register tiles (spawnml.kernel.vectorize): a tile's innermost copies become
vector lanes only where that computes exactly what the copies did.

The class under test is "lanes that are not neighbours": indices whose distance between
lanes changes in a loop or differs between branches, clamped edges, transposed reads,
non-f32 types, helper calls. Each runs on OpenCL (the target with ``vector_width`` 4) and is
compared with numpy; the vector form is asserted where it must appear, so a vectoriser that
quietly gave up would fail too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from spawnml import get_available_backends, get_backend
from spawnml.errors import InvalidInputError
from spawnml.kernel import Output, Tensor, ir, kernel
from spawnml.kernel.tile import reuse_axes, tile_kernel, vector_tile
from spawnml.kernel.vectorize import vectorize

sys.path.insert(0, str(Path(__file__).parent))
from test_tile import _ref_conv, _run, conv2d, matmul

pytestmark = pytest.mark.skipif("opencl" not in get_available_backends(),
                                reason="OpenCL (PoCL) is not available")
VECTOR_TARGETS = [b for b in ("opencl", "wasm") if b in get_available_backends()]
if "cpu" in get_available_backends() and getattr(get_backend("cpu"), "jit", False):
    VECTOR_TARGETS.append("cpu")  # native code (LLVM vectors)
MARK = {"opencl": "float4", "wasm": " v128)", "cpu": " x float>"}  # a vector in the source
SPAN_LOAD = {"wasm": "i8x16.shuffle", "cpu": "shufflevector"}  # a stride-2 load's even lanes


@kernel
def matmul_bt(a: Tensor, b: Tensor, out: Output):
    """B read transposed: neighbouring lanes read elements ``K`` apart."""
    i, j = out.index
    acc = 0.0
    for k in range(a.shape[1]):
        acc = acc + a[i, k] * b[j, k]
    return acc


@kernel
def drift(a: Tensor, out: Output):
    """The lanes' read positions start one apart and drift further apart each iteration."""
    i, j = out.index
    acc = 0.0
    p = i * 3 + j
    for _ in range(4):
        acc = acc + a.flat[p]
        p = p + j
    return acc


@kernel
def branchy(a: Tensor, out: Output):
    """Neighbours in one branch, ``j`` apart in the other (the branch agrees across lanes)."""
    i, j = out.index
    p = 0
    if i % 2 == 0:
        p = i * 8 + j
    else:
        p = i * 8 + j * 2
    return a.flat[p] * 2.0 + a.flat[p + 1]


@kernel
def with_max(a: Tensor, b: Tensor, out: Output):
    i, j = out.index
    acc = 0.0
    for k in range(a.shape[1]):
        acc = acc + a[i, k] * b[k, j]
    return max(acc, 0.0)


def _ref_drift(a: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    flat = a.reshape(-1)
    for i in range(shape[0]):
        for j in range(shape[1]):
            p, acc = i * 3 + j, np.float32(0)
            for _ in range(4):
                acc += flat[p]
                p += j
            out[i, j] = acc
    return out


def _ref_branchy(a: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    flat = a.reshape(-1)
    out = np.zeros(shape, np.float32)
    for i in range(shape[0]):
        for j in range(shape[1]):
            p = i * 8 + j if i % 2 == 0 else i * 8 + j * 2
            out[i, j] = flat[p] * 2 + flat[p + 1]
    return out


rng = np.random.default_rng(3)
A = rng.standard_normal((12, 9)).astype(np.float32)
B = np.abs(rng.standard_normal((9, 16))).astype(np.float32)
BT = np.ascontiguousarray(B.T)
A13 = rng.standard_normal((13, 9)).astype(np.float32)
B11 = rng.standard_normal((9, 11)).astype(np.float32)
FLAT = rng.standard_normal(200).astype(np.float32)
X = rng.standard_normal((3, 9, 14)).astype(np.float32)
W = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)

CASES = {
    "matmul": (matmul, [A, B], (12, 16), lambda: A @ B, True),
    "clamped_edges": (matmul, [A13, B11], (13, 11), lambda: A13 @ B11, True),
    "transposed": (matmul_bt, [A, BT], (12, 16), lambda: A @ B, True),
    "drift": (drift, [FLAT], (8, 8), lambda: _ref_drift(FLAT, (8, 8)), True),
    "branchy": (branchy, [FLAT], (8, 8), lambda: _ref_branchy(FLAT, (8, 8)), False),
    "helper_call": (with_max, [A, -B], (12, 16), lambda: np.maximum(A @ -B, 0), True),
    "padded_conv": (conv2d, [X, W], (8, 9, 14), lambda: _ref_conv(X, W, 1, 1), True),
}
CONSTS = {"padded_conv": {"pad": 1, "stride": 1}}


def _tiled(name: str) -> tuple[object, ir.KernelIR, list[np.ndarray], np.ndarray]:
    k, arrays, shape, ref, _ = CASES[name]
    spec = k.specialize([(a.shape, "float32") for a in arrays], (shape, "float32"),
                        **CONSTS.get(name, {}))
    return k, tile_kernel(spec, (4, 4) if len(shape) == 2 else (4, 1, 4)), arrays, ref()


def _source(spec: ir.KernelIR, backend: str = "opencl") -> str:
    return get_backend(backend).renderer.render(spec)


@pytest.mark.parametrize("backend", VECTOR_TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_vectorised_tile_matches_numpy(case, backend):
    k, tiled, arrays, ref = _tiled(case)
    assert MARK[backend] in _source(tiled, backend) or not CASES[case][4]
    got = _run(backend, k, tiled, arrays)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_a_contiguous_gemm_uses_vector_loads_stores_and_arithmetic():
    _, tiled, _, _ = _tiled("matmul")
    source = _source(tiled)
    assert source.count("vload4(") == 1  # one row of B per k, for the 4 rows of the tile
    assert source.count("vstore4(") == 4
    assert "(float4)(" in source and "_v4 = (" in source


def test_a_padded_convolution_runs_vectors_inside_and_each_lane_at_the_edges():
    """One padding test per lane becomes: every lane inside -> one vector load, else the
    lanes' own tests (lane writes)."""
    _, tiled, _, _ = _tiled("padded_conv")
    source = _source(tiled)
    assert "vload4(0, in_x" in source and "} else {" in source
    assert "_v4.s3 = in_x[" in source


def test_lanes_whose_distance_drifts_in_a_loop_are_not_loaded_as_neighbours():
    _, tiled, _, _ = _tiled("drift")
    assert "vload4(" not in _source(tiled)


def test_lanes_a_transpose_apart_are_gathered_not_loaded_as_neighbours():
    _, tiled, _, _ = _tiled("transposed")
    source = _source(tiled)
    assert "vload4(in_b" not in source and "float4" in source


def test_blocks_at_an_edge_the_tile_does_not_divide_overlap_and_stay_vectors():
    """13 x 11 under a 4 x 4 tile: the last block of each axis starts 4 before the end, so
    its elements stay neighbours (vector loads and stores) and nothing is read past the end."""
    _, tiled, _, _ = _tiled("clamped_edges")
    lowered = get_backend("opencl").renderer.lower(tiled)
    vec = vectorize(lowered, 4)
    assert sum(isinstance(s, ir.VecStore) for s in ir.walk_stmts(vec.body)) == 4
    assert any(isinstance(s, ir.VecAssign) and isinstance(s.value, ir.VecLoad)
               for s in ir.walk_stmts(vec.body))


def test_narrow_targets_and_untiled_kernels_are_left_alone():
    _, tiled, _, _ = _tiled("matmul")
    assert vectorize(tiled, 1) is tiled  # width 1: no vectors
    spec = matmul.specialize([(A.shape, "float32"), (B.shape, "float32")], ((12, 16), "float32"))
    assert vectorize(spec, 4) is spec  # no tile, no lanes


def test_spawnml_vectorize_turns_vectors_off_and_rejects_other_values(monkeypatch):
    _, tiled, _, _ = _tiled("matmul")
    monkeypatch.setenv("SPAWNML_VECTORIZE", "0")
    assert "float4" not in _source(tiled)
    monkeypatch.setenv("SPAWNML_VECTORIZE", "yes")
    with pytest.raises(InvalidInputError, match="SPAWNML_VECTORIZE must be 0"):
        _source(tiled)


@pytest.mark.parametrize("backend", VECTOR_TARGETS)
@pytest.mark.parametrize("tile", [(4, 2), (2, 2), (3, 2)])
def test_two_lane_vectors_write_only_their_two_elements(backend, tile):
    """A 2-lane vector on a 4-lane target (Wasm keeps it in half a v128): its store must not
    touch the neighbouring outputs, which other invocations own."""
    spec = matmul.specialize([(A.shape, "float32"), (B.shape, "float32")], ((12, 16), "float32"))
    tiled = tile_kernel(spec, tile)
    assert MARK[backend].replace("float4", "float2") in _source(tiled, backend)
    got = _run(backend, matmul, tiled, [A, B])
    np.testing.assert_allclose(got, A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", VECTOR_TARGETS)
@pytest.mark.parametrize("case", ["matmul", "clamped_edges", "padded_conv", "transposed",
                                  "drift", "helper_call"])
def test_rows_longer_than_a_vector_become_several_vectors(case, backend):
    """An 8-wide tile row on a 4-lane target: two vectors per row (Wasm's 4 x 8 tiles), each
    loaded and stored as its own four neighbours, and the results what numpy computes."""
    k, arrays, shape, ref, vectorised = CASES[case]
    spec = k.specialize([(a.shape, "float32") for a in arrays], (shape, "float32"),
                        **CONSTS.get(case, {}))
    tiled = tile_kernel(spec, (2, 8) if len(shape) == 2 else (2, 1, 8))
    got = _run(backend, k, tiled, arrays)
    np.testing.assert_allclose(got, ref(), rtol=1e-5, atol=1e-5)
    if vectorised and backend == "opencl":
        vec = vectorize(get_backend("opencl").renderer.lower(tiled), 4)
        assert len(vec.vectors) >= 4  # two accumulators per row, two rows
        assert all(len(v.lane_names) == 4 for v in vec.vectors)
        if case in ("matmul", "clamped_edges", "helper_call"):
            assert sum(isinstance(s, ir.VecStore) for s in ir.walk_stmts(vec.body)) == 4


X2 = rng.standard_normal((3, 11, 17)).astype(np.float32)


@pytest.mark.parametrize("backend", VECTOR_TARGETS)
@pytest.mark.parametrize("lanes", [8, 4, 2])
@pytest.mark.parametrize("pad", [0, 1])
def test_lanes_two_apart_load_the_span_where_the_target_can(backend, lanes, pad):
    """A stride-2 convolution's lanes read every other input element: Wasm loads the span and
    keeps the even lanes (one element past the last lane is read, never used), as does the
    native cpu; OpenCL gathers."""
    spec = conv2d.specialize([(X2.shape, "float32"), (W.shape, "float32")],
                             ((8, (11 + 2 * pad - 3) // 2 + 1, (17 + 2 * pad - 3) // 2 + 1),
                              "float32"), pad=pad, stride=2)  # fmt: skip
    tiled = tile_kernel(spec, (2, 1, lanes))
    source = _source(tiled, backend)
    assert backend not in SPAN_LOAD or SPAN_LOAD[backend] in source
    assert "i8x16.shuffle" not in source or backend == "wasm"
    got = _run(backend, conv2d, tiled, [X2, W])
    np.testing.assert_allclose(got, _ref_conv(X2, W, pad, 2), rtol=1e-5, atol=1e-5)


@kernel
def window_max(x: Tensor, out: Output):
    """A 3-wide max over a padded row: no load is shared between outputs (no reuse to buy),
    but neighbouring outputs read neighbouring elements."""
    i, j = out.index
    best = -1e30
    for k in range(3):
        c = j + k - 1
        if 0 <= c < x.shape[1]:
            best = max(best, x[i, c])
    return best


XW = rng.standard_normal((40, 37)).astype(np.float32)


def _ref_window_max(x: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (1, 1)), constant_values=-1e30)
    return np.max([padded[:, k:k + x.shape[1]] for k in range(3)], axis=0)


@pytest.mark.parametrize("backend", VECTOR_TARGETS)
def test_a_kernel_without_reuse_gets_a_vector_tile_when_its_loads_become_vectors(backend):
    """``Backend.schedule`` tiles the innermost axis by the target's inner side when the
    vectoriser reads the copies' inputs with vector loads; on Wasm, whose traits list
    ``max`` in ``vector_calls``, the max itself is one f32x4.max per vector."""
    target = get_backend(backend)
    spec = window_max.specialize([(XW.shape, "float32")], (XW.shape, "float32"))
    assert not reuse_axes(spec)
    scheduled = target.schedule(spec)
    assert scheduled.tile[-1] == target.tile_inner and scheduled.tile[0] == 1
    source = _source(scheduled, backend)
    assert ("f32x4.max" in source) == (backend == "wasm")
    got = _run(backend, window_max, scheduled, [XW])
    np.testing.assert_array_equal(got, _ref_window_max(XW))


def test_a_vector_tile_needs_loops_and_the_targets_verdict():
    spec = window_max.specialize([(XW.shape, "float32")], (XW.shape, "float32"))
    assert vector_tile(spec, 4, lambda k: False) is spec
    assert vector_tile(spec, 4, lambda k: True).tile == (1, 4)
    assert vector_tile(spec, 64, lambda k: True) is spec  # wider than the row
    flat = elementwise_double.specialize([(XW.shape, "float32")], (XW.shape, "float32"))
    assert vector_tile(flat, 4, lambda k: True) is flat  # loop-free: nothing to tile for


@kernel
def elementwise_double(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0


def test_vector_calls_are_only_made_for_intrinsics_the_target_lists():
    spec = window_max.specialize([(XW.shape, "float32")], (XW.shape, "float32"))
    tiled = tile_kernel(spec, (1, 4))

    def calls(k: ir.KernelIR) -> set[str]:
        return {s.value.fn for s in ir.walk_stmts(k.body)
                if isinstance(s, ir.VecAssign) and isinstance(s.value, ir.VecCall)}

    assert calls(vectorize(tiled, 4, calls=frozenset({"max"}))) == {"max"}
    assert calls(vectorize(tiled, 4)) == set()
