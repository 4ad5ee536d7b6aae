"""``spawnml export-web`` in a real headless Chromium: the exported WebGPU and Wasm plans
against onnxruntime, a device shared by two models, the weights cache's sha256 check, and
clear messages for an unreachable export, a browser without WebGPU and bad feeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml.cli_model import model_path
from spawnml.errors import InvalidInputError
from spawnml_web import export_web
from spawnml_web.browser import Browser, BrowserError, serve, unavailable_reason

REASON = unavailable_reason()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REASON is not None, reason=f"no browser: {REASON}")]

MODELS = ["squeezenet1_1", "mobilenetv2", "espcn_x3", "depth_tiny", "transformer_net"]
ONE_RUN = {"transformer_net"}  # 30 s per run on webgl in SwiftShader
BACKENDS = ["webgpu", "webgl", "wasm"]


def _feeds(path: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    session = ort.InferenceSession(path)
    return {i.name: rng.random(i.shape, dtype=np.float32) for i in session.get_inputs()}


def _reference(path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(path)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def _check(outputs: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(outputs) == sorted(expected)
    for name, ref in expected.items():
        got = outputs[name]
        assert got.shape == ref.shape and got.dtype == ref.dtype, name
        scale = np.maximum(1.0, np.abs(ref))
        assert np.all(np.abs(got - ref) <= 1e-4 * scale), (name, np.abs(got - ref).max())


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Each model exported once for both backends, served for the module's tests."""
    root = tmp_path_factory.mktemp("web")
    for model in MODELS:  # wasm with a 2-thread module too: the served pages are isolated
        export_web(model_path(model), root / model, BACKENDS, threads=2)
    with serve(root) as url:
        yield root, url


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", MODELS)
def test_export_matches_onnxruntime_in_chromium(browser, sites, model, backend):
    root, url = sites
    path = model_path(model)
    feeds = _feeds(path)
    run = browser.run_model(f"{url}{model}/", backend, feeds, runs=1 if model in ONE_RUN else 2)
    assert run.backend == backend
    if backend == "wasm":  # the page is cross-origin isolated: the threaded module runs
        assert run.load["threads"] == "2 threads", run.load
    _check(run.outputs, _reference(path, feeds))
    manifest = json.loads((root / model / backend / "model.json").read_text())
    assert run.load["bytes"] == manifest["weights"]["bytes"]


def _lstm_model() -> bytes:
    """An LSTM with all eight inputs: its step kernels read more buffers than WebGPU's 8
    storage bindings, so inputs are packed (copied into one scratch binding per launch)."""
    rng = np.random.default_rng(0)
    hidden, size, steps, batch = 3, 4, 5, 2

    def const(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)

    lengths = numpy_helper.from_array(np.full(batch, steps, np.int32), "L")
    inits = [const("W", (1, 4 * hidden, size)), const("R", (1, 4 * hidden, hidden)),
             const("B", (1, 8 * hidden)), lengths, const("h0", (1, batch, hidden)),
             const("c0", (1, batch, hidden)), const("P", (1, 3 * hidden))]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "L", "h0", "c0", "P"], ["y"],
                            hidden_size=hidden)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, batch, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "lstm", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()


def test_packed_inputs_run_in_the_browser(browser, tmp_path):
    model = _lstm_model()
    export_web(model, tmp_path, ["webgpu", "webgl"])
    plan = json.loads((tmp_path / "webgpu" / "model.json").read_text())
    assert any("packed" in b for launch in plan["launches"] for b in launch["bindings"])
    x = np.random.default_rng(5).standard_normal((5, 2, 4)).astype(np.float32)
    expected = {"y": ort.InferenceSession(model).run(None, {"x": x})[0]}
    with serve(tmp_path) as url:
        for backend in ("webgpu", "webgl"):
            _check(browser.run_model(url, backend, {"x": x}).outputs, expected)


def test_two_models_share_one_webgpu_device(browser, sites):
    """Two sessions on the device the page made, runs interleaved, both correct."""
    _, url = sites
    a, b = model_path("squeezenet1_1"), model_path("espcn_x3")
    fa, fb = _feeds(a, 1), _feeds(b, 2)
    browser.open(url)  # module imports from the export's origin
    result = browser.evaluate("""async ([url, fa, fb]) => {
      const { InferenceSession, Tensor } = await import(url + "squeezenet1_1/spawnml.mjs");
      const adapter = await navigator.gpu.requestAdapter();
      const device = await adapter.requestDevice();
      const feed = (f) => Object.fromEntries(Object.entries(f).map(([n, v]) =>
        [n, new Tensor("float32", new Float32Array(v.data), v.shape)]));
      const options = { backend: "webgpu", device };
      const sa = await InferenceSession.create(url + "squeezenet1_1/", options);
      const sb = await InferenceSession.create(url + "espcn_x3/", options);
      const out = {};
      for (let i = 0; i < 2; i++) {
        const [ra, rb] = await Promise.all([sa.run(feed(fa)), sb.run(feed(fb))]);
        out.a = Array.from(await ra.logits.getData(true));
        out.b = Array.from(await rb.output.getData(true));
      }
      sa.release(); sb.release();
      const alive = device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE }) !== null;
      return { ...out, alive };
    }""", [url, *({k: {"data": v.ravel().tolist(), "shape": list(v.shape)}}
                  for f in (fa, fb) for k, v in f.items())])
    assert result["alive"]  # sessions given a device do not destroy it
    _check({"logits": np.float32(result["a"]).reshape(1, 1000)}, _reference(a, fa))
    _check({"output": np.float32(result["b"]).reshape(1, 1, 672, 672)}, _reference(b, fb))


def test_corrupt_cached_weights_are_refetched(browser, sites):
    """The Cache API copy of the weights is verified part by part: a flipped byte is
    detected, the copy dropped and the file fetched again; outputs stay correct."""
    _, url = sites
    path = model_path("squeezenet1_1")
    feeds = _feeds(path, 3)
    site = f"{url}squeezenet1_1/"
    browser.open(url)
    first = browser.run_model(site, "wasm", feeds)
    cached = browser.run_model(site, "wasm", feeds)
    assert cached.load["source"] == "cache"
    browser.evaluate("""async (url) => {
      const cache = await caches.open("spawnml-v1");
      const bytes = new Uint8Array(await (await cache.match(url)).arrayBuffer());
      bytes[bytes.length >> 1] ^= 0x40;
      await cache.put(url, new Response(bytes));
    }""", f"{site}wasm/model.weights")
    again = browser.run_model(site, "wasm", feeds)
    assert "failed its sha256 check" in again.load["source"], again.load
    for run in (first, cached, again):
        _check(run.outputs, _reference(path, feeds))
    assert browser.run_model(site, "wasm", feeds).load["source"] == "cache"  # a good copy


def test_a_plan_without_weights_loads_again_from_the_cache(browser, tmp_path):
    """An empty weights file comes back from the Cache API with no body at all: the second
    visit must still load (the depth page's colour stage has no weights)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    export_web(model.SerializeToString(), tmp_path, BACKENDS)
    feeds = {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)}
    with serve(tmp_path) as url:
        for backend in BACKENDS:
            for source in ("network", "cache"):
                run = browser.run_model(url, backend, feeds)
                assert run.load["bytes"] == 0 and run.load["source"] == source
                np.testing.assert_array_equal(run.outputs["y"], np.maximum(feeds["x"], 0))


def test_wasm_threads_only_where_asked_and_possible(browser, sites):
    """``threads: 1`` takes the one-thread module; both give onnxruntime's outputs."""
    _, url = sites
    path = model_path("mobilenetv2")
    feeds = _feeds(path, 6)
    one = browser.run_model(f"{url}mobilenetv2/", "wasm", feeds, options={"threads": 1})
    two = browser.run_model(f"{url}mobilenetv2/", "wasm", feeds)
    assert (one.load["threads"], two.load["threads"]) == ("one thread", "2 threads")
    root, _ = sites
    with serve(root, isolated=False) as plain_url:  # no shared memory: one thread, and why
        plain = browser.run_model(f"{plain_url}mobilenetv2/", "wasm", feeds)
    assert plain.load["threads"].startswith("one thread: the page is not cross-origin isolated")
    for run in (one, two, plain):
        _check(run.outputs, _reference(path, feeds))


def test_unreachable_export_says_so(browser, sites):
    _, url = sites
    with pytest.raises(BrowserError, match=r"SpawnmlError: cannot fetch http://127\.0\.0\.1:9/"):
        browser.run_model("http://127.0.0.1:9/", "wasm", {}, runtime=f"{url}espcn_x3/spawnml.mjs")


def test_bad_feeds_say_what_was_expected(browser, sites):
    _, url = sites
    site = f"{url}squeezenet1_1/"
    x = np.zeros((1, 3, 224, 224), np.float32)
    with pytest.raises(BrowserError, match=r'feeds: expected \["input"\], got \["x"\]'):
        browser.run_model(site, "webgpu", {"x": x})
    with pytest.raises(BrowserError, match=r"input input: expected shape \[1,3,224,224\]"):
        browser.run_model(site, "webgpu", {"input": x[:, :, :100]})
    with pytest.raises(BrowserError, match=r"expected float32 data .* got Int32Array"):
        browser.run_model(site, "wasm", {"input": x.astype(np.int32)})
    with pytest.raises(BrowserError, match=r"not in this export \(it has webgpu, webgl, wasm\)"):
        browser.run_model(site, "metal", {"input": x})


def test_a_browser_without_webgpu_says_so_and_falls_back_when_asked(sites):
    _, url = sites
    path = model_path("squeezenet1_1")
    feeds = _feeds(path, 4)
    with Browser(webgpu=False) as plain:
        with pytest.raises(BrowserError, match=r"webgpu: .*WebGPU"):
            plain.run_model(f"{url}squeezenet1_1/", "webgpu", feeds)
        run = plain.run_model(f"{url}squeezenet1_1/", ["webgpu", "wasm"], feeds)
    assert run.backend == "wasm" and "WebGPU" in run.load["skipped"][0]
    _check(run.outputs, _reference(path, feeds))


def test_the_page_runs_the_model(browser, sites, tmp_path):
    """index.html loads the export, runs it and shows times and outputs."""
    _, url = sites
    browser.open(f"{url}squeezenet1_1/index.html?backend=wasm&runs=2&autorun=1")
    browser.page.wait_for_selector("body[data-done='1']", timeout=120_000)
    text = browser.page.inner_text("#results")
    assert "median run" in text and "logits [1,1000]" in text and "argmax" in text
    browser.screenshot(tmp_path / "page.png")
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_export_web_refuses_unknown_targets(tmp_path):
    with pytest.raises(InvalidInputError, match=r"no web target named \['metal'\]"):
        export_web(model_path("espcn_x3"), tmp_path, ["wasm", "metal"])
    assert not (Path(tmp_path) / "wasm").exists()
