"""If, Loop and Scan bodies get their shapes from the feeds: untyped branch outputs are
inferred, a Conv network inside a branch is planned with the outer input's shape, loop
trip counts come from feeds, and values stay on the device across the bodies. Every
case is compared with onnxruntime on every available backend."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper, numpy_helper

import spawnml.graph.importer as importer
from spawnml import DeviceTensor, InferenceSession, get_available_backends

ort = pytest.importorskip("onnxruntime")

BACKENDS = [b for b in ("cpu", "opencl", "webgpu", "webgl", "wasm")
            if b in get_available_backends()]  # fmt: skip
RNG = np.random.default_rng(7)


@pytest.fixture(params=[True, False], ids=["onnx-inference", "own-inference"])
def onnx_inference(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Run each case with onnx's shape inference merged in, and without it (so only
    spawnml's own specialisation of the bodies gives the branch outputs their types)."""
    if not request.param:
        monkeypatch.setattr(importer, "_add_inferred_types", lambda proto, graph: None)
    yield request.param


def _w(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


def _conv_branch(name: str, stride: int, channels: int) -> object:
    """Conv -> Relu -> Conv over the outer ``x`` (N, 1, L); the output is untyped."""
    w1, w2 = f"{name}_w1", f"{name}_w2"
    nodes = [
        helper.make_node("Conv", ["x", w1], [f"{name}_a"], strides=[stride], pads=[1, 1]),
        helper.make_node("Relu", [f"{name}_a"], [f"{name}_r"]),
        helper.make_node("Conv", [f"{name}_r", w2], [f"{name}_y"], pads=[1, 1]),
    ]
    inits = [numpy_helper.from_array(_w(channels, 1, 3), w1),
             numpy_helper.from_array(_w(4, channels, 3), w2)]  # fmt: skip
    out = helper.ValueInfoProto(name=f"{name}_y")  # no type, no shape
    return helper.make_graph(nodes, name, [], [out], inits)


def _if_conv_model() -> object:
    """y = (sr == 16000 ? conv net, stride 2 : conv net, stride 1)(x) , then Sigmoid; the
    branches give different lengths, so the Sigmoid's shape is known only at run time."""
    nodes = [
        helper.make_node("Equal", ["sr", "k16000"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["feat"],
                         then_branch=_conv_branch("hi", 2, 6),
                         else_branch=_conv_branch("lo", 1, 5)),
        helper.make_node("Sigmoid", ["feat"], ["y"]),
    ]  # fmt: skip
    return make_model(nodes, [("sr", TensorProto.INT64, []), ("x", F, ["N", 1, "L"])],
                      [("y", F, None)], {"k16000": np.array(16000, np.int64)})  # fmt: skip


def _compare(model: object, feeds: dict, backend: str, tol: float = 1e-4) -> InferenceSession:
    data = model.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = InferenceSession(data, backends=[backend])
    got = sess.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return sess


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_on_a_scalar_feed_with_conv_branches_matches_onnxruntime(backend: str,
                                                                    onnx_inference: bool) -> None:
    model = _if_conv_model()
    for sr, length in [(16000, 32), (8000, 32), (16000, 20), (8000, 9)]:
        feeds = {"sr": np.array(sr, np.int64), "x": _w(2, 1, length)}
        sess = _compare(model, feeds, backend)
    assert sess.placement().kinds["If_1"] == "control"


def _loop_conv_model() -> object:
    """A Loop whose trip count is a feed: h = Relu(Conv(h) + x) carried (shape fixed),
    a per-iteration scan output, and a carried sequence that grows by one row per
    iteration (its shape changes, so it is specialised per iteration)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Conv", ["h_in", "w"], ["conv"], pads=[1, 1]),
         helper.make_node("Add", ["conv", "x"], ["sum"]),
         helper.make_node("Relu", ["sum"], ["h_out"]),
         helper.make_node("ReduceMean", ["h_out"], ["row"], axes=[2], keepdims=1),
         helper.make_node("Concat", ["rows_in", "row"], ["rows_out"], axis=2),
         helper.make_node("Mul", ["h_out", "half"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.ValueInfoProto(name="h_in"), helper.ValueInfoProto(name="rows_in")],
        [helper.ValueInfoProto(name="c_out"), helper.ValueInfoProto(name="h_out"),
         helper.ValueInfoProto(name="rows_out"), helper.ValueInfoProto(name="scan")],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")],
    )  # fmt: skip
    nodes = [helper.make_node("Loop", ["M", "", "x", "rows0"], ["h", "rows", "scans"], body=body)]
    return make_model(
        nodes,
        [("M", TensorProto.INT64, []), ("x", F, [1, 3, "L"]), ("rows0", F, [1, 3, 0])],
        [("h", F, None), ("rows", F, None), ("scans", F, None)],
        {"w": _w(3, 3, 3)},
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_with_trip_count_from_a_feed_matches_onnxruntime(backend: str,
                                                              onnx_inference: bool) -> None:
    model = _loop_conv_model()
    rows0 = np.zeros((1, 3, 0), np.float32)
    for trips, length in [(3, 16), (5, 16), (0, 7), (2, 7)]:
        feeds = {"M": np.array(trips, np.int64), "x": _w(1, 3, length), "rows0": rows0}
        _compare(model, feeds, backend)


def _scan_model() -> object:
    """Scan 16 over axis 1 of x (N, T, D), reversed, with a running sum state and the
    scan output stacked on axis 0."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Tanh", ["s_out"], ["y_t"])],
        "body", [helper.ValueInfoProto(name="s_in"), helper.ValueInfoProto(name="x_t")],
        [helper.ValueInfoProto(name="s_out"), helper.ValueInfoProto(name="y_t")],
    )  # fmt: skip
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1],
                            scan_output_axes=[1])  # fmt: skip
    return make_model([node], [("s0", F, ["N", "D"]), ("x", F, ["N", "T", "D"])],
                      [("s", F, None), ("ys", F, None)])  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_matches_onnxruntime(backend: str) -> None:
    for n, t, d in [(2, 5, 3), (1, 1, 4)]:
        feeds = {"s0": _w(n, d), "x": _w(n, t, d)}
        _compare(_scan_model(), feeds, backend)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "cpu"])
def test_if_reads_only_the_condition_from_the_device(backend: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Outer values stay on the device: a run downloads the condition (one element) and
    the result, nothing else."""
    model = _if_conv_model()
    sess = InferenceSession(model.SerializeToString(), backends=[backend])
    feeds = {"sr": np.array(16000, np.int64), "x": _w(1, 1, 64)}
    sess.run(None, feeds)  # plans, uploads weights
    sizes: list[int] = []
    original = DeviceTensor.numpy

    def counted(self: DeviceTensor) -> np.ndarray:
        sizes.append(int(np.prod(self.shape)))
        return original(self)

    monkeypatch.setattr(DeviceTensor, "numpy", counted)
    (y,) = sess.run(None, feeds)
    assert sorted(sizes) == [1, y.size], sizes


def test_untaken_branch_that_cannot_fit_these_shapes_does_not_fail_planning() -> None:
    """A branch whose ops do not fit the feed shapes is only checked if it runs."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["ty"])], "then", [],
                               [helper.ValueInfoProto(name="ty")])  # fmt: skip
    else_g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["ey"])], "else", [],
        [helper.ValueInfoProto(name="ey")],
        [numpy_helper.from_array(np.array([7, 3], np.int64), "shape")],
    )  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    model = make_model([node], [("c", TensorProto.BOOL, []), ("x", F, [4])], [("y", F, None)])
    sess = InferenceSession(model.SerializeToString(), backends=["cpu"])
    x = np.array([1, -2, 3, -4], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(True), "x": x})[0],
                                  np.maximum(x, 0))  # fmt: skip
    with pytest.raises(Exception, match="Reshape"):
        sess.run(None, {"c": np.array(False), "x": x})


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_time_view_keeps_the_planned_buffer_it_views_alive(backend: str) -> None:
    """An Unsqueeze whose axes are a feed is specialised only when it runs, where it is a
    view of a planned intermediate; that intermediate's buffer must not be reused by the
    steps planned after it while the view is still read (the class of failure a Scan body
    reading outer-scope axes hit)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"]),
        helper.make_node("Neg", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),
        helper.make_node("Tanh", ["b"], ["c"]),
        helper.make_node("Reshape", ["c", "shape"], ["d"]),
        helper.make_node("Add", ["u", "d"], ["y"]),
    ]
    model = make_model(nodes, [("x", F, [4, 8]), ("axes", TensorProto.INT64, [1])],
                       [("y", F, None)], {"shape": np.array([4, 1, 8], np.int64)})  # fmt: skip
    x = _w(4, 8)
    sess = InferenceSession(model.SerializeToString(), backends=[backend])
    for _ in range(2):
        (y,) = sess.run(None, {"x": x, "axes": np.array([1], np.int64)})
        want = np.maximum(x, 0)[:, None, :] + np.tanh(1 / (1 + np.exp(x)))[:, None, :]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
