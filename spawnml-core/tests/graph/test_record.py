"""Recorded plans (graph.record): replays give the normal path's answers on every backend,
follow feed changes, never overwrite results a caller kept, and fall back where a plan
cannot be recorded; profiles count the launches actually issued."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper

from spawnml import InferenceSession, get_available_backends
from spawnml.backend import Backend
from spawnml.graph.record import Recording
from spawnml.registry import get_backend
from spawnml.tensor import DeviceTensor

ort = pytest.importorskip("onnxruntime")

BACKENDS = get_available_backends()
RNG = np.random.default_rng(0)


def _matmul_chain(n: int = 12) -> object:
    nodes, inits, prev = [], {}, "x"
    for i in range(n):
        q, _ = np.linalg.qr(RNG.standard_normal((8, 8)))
        inits[f"w{i}"] = q.astype(np.float32)
        out = "y" if i == n - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    return make_model(nodes, [("x", F, [1, 8])], [("y", F, [1, 8])], inits)


def _mixed() -> object:
    """Device steps, a host step (Det) between them with transfers both ways, a reshape
    alias as an output, an output that later steps also read, two outputs on one buffer."""
    nodes = [
        helper.make_node("Add", ["x", "b"], ["t"], name="add"),
        helper.make_node("Reshape", ["t", "shape"], ["flat"], name="flatten"),  # output
        helper.make_node("Det", ["t"], ["d"], name="det"),  # host
        helper.make_node("Mul", ["d", "c"], ["e"], name="mul"),  # device again
        helper.make_node("Sigmoid", ["e"], ["s"], name="sig"),  # output, read below
        helper.make_node("Add", ["s", "s"], ["u"], name="twice"),
        helper.make_node("Reshape", ["u", "shape2"], ["u2"], name="u_view"),  # output
    ]
    inits = {
        "b": RNG.standard_normal((3, 3)).astype(np.float32),
        "shape": np.array([2, 9], np.int64),
        "c": np.array([0.5, -0.25], np.float32),
        "shape2": np.array([2, 1], np.int64),
    }
    return make_model(
        nodes,
        [("x", F, [2, 3, 3])],
        [("flat", F, [2, 9]), ("s", F, [2]), ("u", F, [2]), ("u2", F, [2, 1])],
        inits,
    )


def _ort(model: object, feed: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def _recording(sess: InferenceSession) -> Recording | None:
    plan = sess._runner.last_plan
    assert plan is not None
    found = [r for r in plan.recordings.values() if r is not None]
    return found[0] if found else None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build", [_matmul_chain, _mixed], ids=["matmul_chain", "mixed"])
def test_replay_equals_first_run_and_onnxruntime(backend: str, build) -> None:
    model = build()
    x = RNG.standard_normal((1, 8) if build is _matmul_chain else (2, 3, 3)).astype(np.float32)
    with InferenceSession(model, [backend]) as sess:
        first = sess.run(None, {"x": x})
        assert _recording(sess) is None  # the first run takes the normal path
        replays = [sess.run(None, {"x": x}) for _ in range(3)]
        assert _recording(sess) is not None
        want = _ort(model, {"x": x})
        for got in replays:
            for g, f, w in zip(got, first, want):
                np.testing.assert_array_equal(g, f)
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        # A new feed gives the new answer (the recorded input buffer is rewritten).
        x2 = (3 * x + 1).astype(np.float32)
        for g, w in zip(sess.run(None, {"x": x2}), _ort(model, {"x": x2})):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kept_device_outputs_survive_later_replays(backend: str) -> None:
    model = _mixed()
    xs = [RNG.standard_normal((2, 3, 3)).astype(np.float32) for _ in range(4)]
    with InferenceSession(model, [backend]) as sess:
        kept = [sess.run(None, {"x": x}, device=True) for x in xs]
        assert _recording(sess) is not None
        for x, outs in zip(xs, kept):
            for got, want in zip(outs, _ort(model, {"x": x})):
                value = got.numpy() if isinstance(got, DeviceTensor) else got
                np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
        for outs in kept:
            for t in outs:
                if isinstance(t, DeviceTensor):
                    t.close()
        # Handing buffers over renews them: later host runs are still right.
        for g, w in zip(sess.run(None, {"x": xs[0]}), _ort(model, {"x": xs[0]})):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_outputs_of_run_one_unchanged_after_run_two(backend: str) -> None:
    model = _matmul_chain()
    with InferenceSession(model, [backend]) as sess:
        x1, x2 = (RNG.standard_normal((1, 8)).astype(np.float32) for _ in range(2))
        outs = [sess.run(None, {"x": x})[0] for x in (x1, x2, x1, x2)]
        saved = [o.copy() for o in outs]
        sess.run(None, {"x": x1})
        for o, s in zip(outs, saved):
            np.testing.assert_array_equal(o, s)
        np.testing.assert_array_equal(outs[0], outs[2])
        assert not np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_tensor_feeds_are_bound_and_rebound(backend: str) -> None:
    model = _matmul_chain()
    b = get_backend(backend)
    xs = [RNG.standard_normal((1, 8)).astype(np.float32) for _ in range(3)]
    with InferenceSession(model, [backend]) as sess:
        feeds = [DeviceTensor.from_numpy(b, x) for x in xs]
        try:
            got = [sess.run(None, {"x": f})[0] for f in [*feeds, feeds[0], feeds[2]]]
            assert _recording(sess) is not None
            for g, x in zip(got, [*xs, xs[0], xs[2]]):
                np.testing.assert_allclose(g, _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
            # The same tensor with new contents (written in place) gives the new answer.
            b.upload(xs[1], feeds[2].buffer)
            want = _ort(model, {"x": xs[1]})[0]
            np.testing.assert_allclose(sess.run(None, {"x": feeds[2]})[0], want, rtol=1e-4,
                                       atol=1e-5)  # fmt: skip
            # Host feeds after device feeds: a separate recording, still right.
            np.testing.assert_allclose(sess.run(None, {"x": xs[0]})[0], got[0], rtol=1e-6)
        finally:
            for f in feeds:
                f.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_feeds_closed_by_their_owner_between_runs(backend: str) -> None:
    """The plan outlives its feeds: each run's DeviceTensor is closed by the caller before
    the next run (a pipeline's pre-processed image), through recording and many replays."""
    model = _matmul_chain()
    b = get_backend(backend)
    xs = [RNG.standard_normal((1, 8)).astype(np.float32) for _ in range(6)]
    with InferenceSession(model, [backend]) as sess:
        for x in xs:
            with DeviceTensor.from_numpy(b, x) as feed:
                (y,) = sess.run(None, {"x": feed}, device=True)
            with y:
                np.testing.assert_allclose(y.numpy(), _ort(model, {"x": x})[0], rtol=1e-4,
                                           atol=1e-5)  # fmt: skip
        assert _recording(sess) is not None


def test_control_flow_plans_run_the_normal_path() -> None:
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["ty"])], "then", [],
                               [helper.make_tensor_value_info("ty", F, [3])])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["ey"])], "else", [],
                               [helper.make_tensor_value_info("ey", F, [3])])  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    model = make_model([node], [("c", TensorProto.BOOL, []), ("x", F, [3])], [("y", F, [3])])
    x = np.array([0.5, -2, 3], np.float32)
    with InferenceSession(model, ["cpu"]) as sess:
        for cond in [True, False, True, False]:
            (y,) = sess.run(None, {"c": np.array(cond), "x": x})
            np.testing.assert_allclose(y, np.maximum(x, 0) if cond else -x)
        plan = sess._runner.last_plan
        assert plan is not None and list(plan.recordings.values()) == [None]
        assert "If" in plan.not_recorded


def test_recording_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _matmul_chain()
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    with InferenceSession(model, ["cpu"], options={"record": False}) as sess:
        for _ in range(3):
            sess.run(None, {"x": x})
        assert sess._runner.last_plan.recordings == {}  # type: ignore[union-attr]
    monkeypatch.setenv("SPAWNML_RECORD", "0")
    with InferenceSession(model, ["cpu"]) as sess:
        for _ in range(3):
            sess.run(None, {"x": x})
        assert sess._runner.last_plan.recordings == {}  # type: ignore[union-attr]


def _count_launches(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> list[int]:
    """Count ``backend.launch`` calls; recorded launches go through the default bind."""
    calls = [0]
    launch = backend.launch

    def counted(*args: object) -> None:
        calls[0] += 1
        launch(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "launch", counted)
    monkeypatch.setattr(backend, "bind", functools.partial(Backend.bind, backend))
    monkeypatch.setattr(backend, "sequence", functools.partial(Backend.sequence, backend))
    return calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_profile_counts_the_launches_issued(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")  # every node a portable launch
    b = get_backend(backend)
    calls = _count_launches(monkeypatch, b)
    model = _mixed()
    x = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    with InferenceSession(model, [b]) as sess:
        first = sess.profile({"x": x})  # normal path
        assert first.replayed_runs == 0 and first.runs == 1
        assert first.launches == calls[0] > 0
        calls[0] = 0
        replays = sess.profile({"x": x}, runs=3)
        assert replays.replayed_runs == 3
        assert replays.launches == calls[0] == 3 * first.launches
        assert replays.launches_per_run == first.launches
        rec = _recording(sess)
        assert rec is not None and rec.n_launches == first.launches


@pytest.mark.parametrize("backend", BACKENDS)
def test_profile_reports_kernels_nodes_and_times(backend: str) -> None:
    model = _mixed()
    x = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    with InferenceSession(model, [backend]) as sess:
        sess.run(None, {"x": x}, profile=True)
        sess.run(None, {"x": x})
        sess.run(None, {"x": x}, profile=True)
        prof = sess.profile()
        assert prof.runs == 2 and prof.replayed_runs == 1 and prof.model_nodes == 7
        data = json.loads(prof.json())
        assert data["model_nodes"] == 7 and data["runs"] == 2
        nodes = {n for k in data["kernels"] for n in k["nodes"]}
        assert {"add", "det", "mul", "sig", "twice"} <= nodes
        det = [k for k in data["kernels"] if k["nodes"] == ["det"]]
        assert det and all(k["backend"] == "host" for k in det)
        device = [k for k in data["kernels"] if k["kind"] in ("launch", "kernel")]
        assert all(k["backend"] == backend and k["count"] >= 1 for k in device)
        assert all(k["bytes"] > 0 for k in device)
        assert data["launches"] == sum(k["count"] for k in device)
        assert 0 < data["device_s"] <= data["run_s"]
        assert data["host_s"] == pytest.approx(data["run_s"] - data["device_s"])
        assert backend in data["device_timing"]
        # The replayed run's launches are timed by the device where it can.
        expected = {"cpu": "synchronous", "wasm": "synchronous", "opencl": "events",
                    "webgl": "queries", "webgpu": get_backend(backend).device_timing}  # fmt: skip
        assert data["device_timing"][backend]["method"] == expected.get(backend, "synchronize")
        table = prof.table()
        assert "launches per run" in table and "det" in table and backend in table
        assert sess.profile(reset=True) is prof and sess.profile().runs == 0


def test_a_failing_bind_keeps_the_normal_path(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")
    b = get_backend("cpu")

    def broken(*args: object) -> None:
        raise RuntimeError("no binding today")

    monkeypatch.setattr(b, "bind", broken)
    model = _matmul_chain()
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    with InferenceSession(model, [b]) as sess:
        results = [sess.run(None, {"x": x})[0] for _ in range(3)]
        plan = sess._runner.last_plan
        assert plan is not None and list(plan.recordings.values()) == [None]
        assert "no binding today" in plan.not_recorded
    for r in results:
        np.testing.assert_allclose(r, _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert "recording this plan failed" in caplog.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_fed_back_alternate_two_bound_buffer_sets(backend: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A loop that feeds each run's kept output back as the next run's input (a KV cache)
    binds launches only while its first buffer sets are new; from then on each replay
    restores kept bindings, and the answers stay onnxruntime's."""
    model = _matmul_chain()
    binds = {"n": 0}
    original = Recording._bind

    def counting(self, launch):
        binds["n"] += 1
        return original(self, launch)

    monkeypatch.setattr(Recording, "_bind", counting)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    want = x
    with InferenceSession(model, [backend]) as sess:
        feed = DeviceTensor.from_numpy(get_backend(backend), x)
        counts = []
        for _ in range(8):
            (y,) = sess.run(None, {"x": feed}, device=True)
            feed.close()
            feed = y
            want = _ort(model, {"x": want})[0]
            counts.append(binds["n"])
        try:
            np.testing.assert_allclose(feed.numpy(), want, rtol=1e-4, atol=1e-5)
        finally:
            feed.close()
        assert _recording(sess) is not None
    assert counts[-1] == counts[3], counts  # no launch bound again after the fourth run
