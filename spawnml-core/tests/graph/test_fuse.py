"""Graph-level fusion: fused plans launch fewer kernels and still match onnxruntime on every
available backend; values that must stay materialised are never fused away."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper

from spawnml import InferenceSession, get_available_backends
from spawnml.graph.fuse import FUSED

ort = pytest.importorskip("onnxruntime")
I32 = TensorProto.INT32
H = TensorProto.FLOAT16
PORTABLE = [
    b for b in ("cpu", "opencl", "webgpu", "webgl", "wasm") if b in get_available_backends()
]


@pytest.fixture(params=PORTABLE)
def backend(request, monkeypatch) -> str:
    # cpu's numpy/BLAS kernels are not kernel-language kernels: fusion applies to the
    # portable ones, so the cpu case runs those.
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")
    return request.param


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _run(model, feeds, backend, **kw):
    session = InferenceSession(model.SerializeToString(), backends=[backend], **kw)
    got = session.run(None, feeds)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session, got, ref.run(None, feeds)


def _launches(session) -> int:
    steps = session._runner.last_plan.spec.steps
    return sum(
        sum(1 for s in st.run.steps if s.size) for st in steps if st.kind == "portable"
    ) + sum(1 for st in steps if st.kind == "kernel")


def _fused_away(session) -> set[str]:
    """Nodes whose step was absorbed into a later fused step."""
    steps = session._runner.last_plan.spec.steps
    return {n.name for st in steps if st.kind == FUSED for n in (st.fused or [st.node])}


def _close(got, ref, tol=1e-5):
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


def _conv_block():
    """Conv -> Add(residual) -> Relu -> x*Sigmoid(x) -> Mul(scale): one kernel when fused."""
    rng = _rng(1)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Add", ["c", "x"], ["r"], name="add"),
        helper.make_node("Relu", ["r"], ["a"], name="relu"),
        helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),
        helper.make_node("Mul", ["a", "s"], ["m"], name="silu"),
        helper.make_node("Mul", ["m", "k"], ["y"], name="scale"),
    ]
    inits = {"w": w, "k": np.float32([0.5, 1.0, 2.0, -1.0]).reshape(1, 4, 1, 1)}
    shape = [1, 4, 6, 5]
    return make_model(nodes, [("x", F, shape)], [("y", F, shape)], inits)


def test_conv_epilogue_chain_is_one_kernel(backend):
    x = _rng().standard_normal((1, 4, 6, 5)).astype(np.float32)
    session, got, ref = _run(_conv_block(), {"x": x}, backend)
    _close(got, ref)
    assert _launches(session) == 1
    placement = session.placement()
    # (Relu is folded into Add by the activation pass that runs before fusion)
    assert set(placement.fused) == {"conv", "add", "sig", "silu", "scale"}
    assert placement.fused["conv"] == "conv+add+sig+silu+scale"


def test_fusion_off_gives_the_same_answer_with_one_launch_per_node(backend, monkeypatch):
    x = _rng().standard_normal((1, 4, 6, 5)).astype(np.float32)
    fused, got_fused, ref = _run(_conv_block(), {"x": x}, backend)
    monkeypatch.setenv("SPAWNML_FUSE", "0")
    plain, got_plain, _ = _run(_conv_block(), {"x": x}, backend)
    _close(got_plain, ref)
    np.testing.assert_allclose(got_fused[0], got_plain[0], rtol=1e-6, atol=1e-6)
    assert _launches(plain) == 5 and _launches(fused) == 1
    off, _, _ = _run(_conv_block(), {"x": x}, backend, options={"optimize": False})
    assert not off.placement().fused


def test_values_read_twice_or_returned_stay_materialised(backend):
    # t = Exp(x) feeds two nodes; u = Neg(t) is a graph output and feeds Add.
    nodes = [
        helper.make_node("Exp", ["x"], ["t"], name="exp"),
        helper.make_node("Neg", ["t"], ["u"], name="neg"),
        helper.make_node("Sqrt", ["t"], ["v"], name="sqrt"),
        helper.make_node("Add", ["u", "v"], ["y"], name="add"),
    ]
    model = make_model(nodes, [("x", F, [3, 5])], [("y", F, [3, 5]), ("u", F, [3, 5])])
    x = _rng(2).standard_normal((3, 5)).astype(np.float32)
    session, got, ref = _run(model, {"x": x}, backend)
    _close(got, ref)
    assert _fused_away(session) == {"sqrt"}  # only v has a single reader and is no output
    assert _launches(session) == 3


def test_prologue_transpose_into_matmul_and_broadcast_reads(backend):
    # Transpose and a broadcasting Relu(b) are straight-line: both are read by their
    # consumers' expressions; Add broadcasts (3,4) + (4,), not an identity read.
    rng = _rng(3)
    nodes = [
        helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0], name="tr"),
        helper.make_node("MatMul", ["at", "w"], ["p"], name="mm"),
        helper.make_node("Relu", ["b"], ["rb"], name="relu"),
        helper.make_node("Add", ["p", "rb"], ["y"], name="add"),
    ]
    model = make_model(
        nodes, [("a", F, [6, 3]), ("b", F, [4])], [("y", F, [3, 4])],
        {"w": rng.standard_normal((6, 4)).astype(np.float32)},
    )
    feeds = {"a": rng.standard_normal((6, 3)).astype(np.float32),
             "b": rng.standard_normal(4).astype(np.float32)}  # fmt: skip
    session, got, ref = _run(model, feeds, backend)
    _close(got, ref)
    assert _launches(session) == 1


def test_an_expensive_producer_is_not_recomputed_inside_a_loop(backend):
    rng = _rng(4)
    nodes = [
        helper.make_node("Exp", ["a"], ["e"], name="exp"),
        helper.make_node("MatMul", ["e", "w"], ["y"], name="mm"),
    ]
    model = make_model(nodes, [("a", F, [2, 8])], [("y", F, [2, 3])],
                       {"w": rng.standard_normal((8, 3)).astype(np.float32)})
    session, got, ref = _run(model, {"a": rng.standard_normal((2, 8)).astype(np.float32)},
                             backend)
    _close(got, ref)
    assert _launches(session) == 2  # exp would be computed once per output column


def test_integer_chains_fuse_and_float16_intermediates_do_not(backend):
    nodes = [
        helper.make_node("Add", ["x", "x"], ["d"], name="double"),
        helper.make_node("Mul", ["d", "x"], ["y"], name="mul"),
    ]
    model = make_model(nodes, [("x", I32, [7])], [("y", I32, [7])])
    x = np.arange(-3, 4, dtype=np.int32)
    session, got, ref = _run(model, {"x": x}, backend)
    np.testing.assert_array_equal(got[0], ref[0])
    assert _launches(session) == 1
    half = make_model(
        [helper.make_node("Add", ["h", "h"], ["d"], name="double"),
         helper.make_node("Mul", ["d", "h"], ["y"], name="mul")],
        [("h", H, [7])], [("y", H, [7])],
    )  # fmt: skip
    h = np.linspace(-2, 2, 7).astype(np.float16)
    session, got, ref = _run(half, {"h": h}, backend)
    np.testing.assert_array_equal(got[0], ref[0])  # f16 rounding of d kept: exact
    assert _fused_away(session) == set()


def test_normalisation_apply_takes_its_elementwise_consumer(backend):
    # InstanceNormalization is two launches (statistics, apply); the Relu runs in the
    # apply. The apply reads three buffers, so it is not recomputed inside the next Conv's
    # loop: conv1, stats, apply+relu, conv2.
    rng = _rng(5)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("InstanceNormalization", ["c1", "s", "b"], ["n"], name="norm"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2"),
    ]
    inits = {
        "w1": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
        "w2": rng.standard_normal((2, 3, 1, 1)).astype(np.float32),
        "s": rng.uniform(0.5, 1.5, 3).astype(np.float32),
        "b": rng.standard_normal(3).astype(np.float32),
    }
    model = make_model(nodes, [("x", F, [1, 2, 5, 6])], [("y", F, [1, 2, 5, 6])], inits)
    session, got, ref = _run(model, {"x": rng.standard_normal((1, 2, 5, 6)).astype(np.float32)},
                             backend)
    _close(got, ref, 1e-4)
    assert _launches(session) == 4
    assert session.placement().fused == {"norm": "norm+relu", "relu": "norm+relu"}


def test_fused_kernel_inputs_get_distinct_names():
    from spawnml.dtypes import DType
    from spawnml.kernel.compose import _unique_inputs
    from spawnml.kernel.ir import BufferSpec

    specs = [BufferSpec(n, DType.float32, (2,)) for n in ("b", "b_1", "b", "x", "b")]
    names = [s.name for s in _unique_inputs(specs)]
    assert len(set(names)) == 5 and names[:2] == ["b", "b_1"]


def test_fusion_reads_through_reshape_views(backend):
    # MatMul -> Reshape -> Add(bias) fuses as an epilogue, Transpose -> Reshape -> MatMul
    # as a prologue: a view has its source's flat layout. The view r2 is also a graph
    # output in the second model, so there the Transpose stays.
    rng = _rng(6)
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [4, 6])
    nodes = [
        helper.make_node("MatMul", ["a", "w"], ["p"], name="mm"),
        helper.make_node("Reshape", ["p", "shape"], ["r"], name="view"),
        helper.make_node("Add", ["r", "bias"], ["q"], name="add"),
        helper.make_node("Transpose", ["q"], ["t"], perm=[1, 0], name="tr"),
        helper.make_node("Reshape", ["t", "shape2"], ["r2"], name="view2"),
        helper.make_node("MatMul", ["r2", "w2"], ["y"], name="mm2"),
    ]
    inits = {
        "w": rng.standard_normal((4, 6)).astype(np.float32),
        "bias": rng.standard_normal(6).astype(np.float32),
        "shape2": np.array([4, 6], np.int64),
        "w2": rng.standard_normal((6, 3)).astype(np.float32),
    }
    feeds = {"a": rng.standard_normal((2, 2, 4)).astype(np.float32)}

    def model(outputs):
        m = make_model(nodes, [("a", F, [2, 2, 4])], outputs, inits)
        m.graph.initializer.append(shape)
        return m

    session, got, ref = _run(model([("y", F, [4, 3])]), feeds, backend)
    _close(got, ref)
    assert _launches(session) == 2
    assert session.placement().fused["view2"] == "tr+view2+mm2"
    session, got, ref = _run(model([("y", F, [4, 3]), ("r2", F, [4, 6])]), feeds, backend)
    _close(got, ref)
    assert _launches(session) == 3
