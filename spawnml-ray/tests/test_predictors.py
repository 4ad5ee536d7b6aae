"""The map_batches callables and model shipping, against single-process spawnml."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession, hub
from spawnml.errors import BackendUnavailableError, InvalidInputError
from spawnml_ray import (
    ModelShippingError,
    PipelinePredictor,
    SessionPredictor,
    node_backends,
    ship_model,
)

RNG = np.random.default_rng(0)


def _mlp(path, batch: int | str) -> np.ndarray:
    """A two-layer model whose first input dim is ``batch`` (symbolic or fixed)."""
    import onnx

    w1 = RNG.standard_normal((16, 32)).astype(np.float32)
    w2 = RNG.standard_normal((32, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.parametrize("batch", ["N", 1])
def test_session_predictor_on_ray_equals_one_session(tmp_path, batch) -> None:
    import ray.data

    path = _mlp(tmp_path / "mlp.onnx", batch)
    x = RNG.standard_normal((37, 16)).astype(np.float32)
    shipped = ship_model(path)
    ds = ray.data.from_numpy(x).map_batches(
        SessionPredictor, fn_constructor_kwargs={"model": shipped, "backend": "cpu",
                                                 "input_column": "data"},
        batch_size=10, compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1)
    got = np.concatenate([b["y"] for b in ds.iter_batches(batch_size=None)])
    with InferenceSession(str(path), ["cpu"]) as sess:
        want = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # row order is kept
    assert got.shape == (37, 4)


def test_session_predictor_runs_fixed_batch_models_in_slices(tmp_path) -> None:
    predictor = SessionPredictor(_mlp(tmp_path / "m.onnx", 1), "cpu")
    assert predictor.fixed_batch == 1
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    got = predictor({"x": x})["y"]
    with InferenceSession(str(tmp_path / "m.onnx"), ["cpu"]) as sess:
        want = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0] for i in range(5)])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(InvalidInputError, match="no column 'x'"):
        predictor({"data": x})


def test_pipeline_predictor_takes_paths_bytes_and_arrays(tmp_path, make_images) -> None:
    (path,) = make_images(tmp_path, 1, seed=2, nested=False)
    predictor = PipelinePredictor("classify", backend=["nope", "cpu"])
    assert predictor.backends == ["cpu"]
    from spawnml_pipelines.image_io import load_image

    for column, value in [("path", str(path)), ("bytes", path.read_bytes()),
                          ("image", load_image(path))]:
        values = np.empty(2, dtype=object)
        values[:] = [value, value]
        out = predictor({column: values})
        assert list(out["error"]) == ["", ""], column
        assert out["label"][0] == out["label"][1] and out["backend"][0] == "cpu"
    bad = predictor({"bytes": np.array([b"not an image"], dtype=object)})
    assert bad["error"][0].startswith("InvalidInputError: cannot decode image bytes")
    assert bad["label"][0] is None
    with pytest.raises(InvalidInputError, match="'image', 'bytes' or 'path' column"):
        predictor({"pixels": np.zeros(1)})


def test_node_backends_pick_what_this_node_has() -> None:
    assert node_backends("cpu") == ["cpu"]
    assert node_backends(["nope", "cpu"]) == ["cpu"]
    assert node_backends("nope, cpu") == ["cpu"]
    assert node_backends(None)[0] in node_backends("auto")
    with pytest.raises(BackendUnavailableError, match="none of the backends nope, gone"):
        node_backends(["nope", "gone"])


@pytest.mark.usefixtures("ray_cluster")
def test_shipping_writes_the_model_once_per_node_and_verifies_it(tmp_path,
                                                                  monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path / "cache"))
    path = _mlp(tmp_path / "mlp.onnx", "N")
    shipped = ship_model(path)
    assert shipped.sha256 == hub.file_sha256(path) and shipped.ref is not None
    local = shipped.local_path()
    assert local.read_bytes() == path.read_bytes()
    assert local.is_relative_to(tmp_path / "cache")
    stamp = local.stat().st_mtime_ns
    assert shipped.local_path() == local and local.stat().st_mtime_ns == stamp  # cached
    local.write_bytes(b"corrupted")  # a damaged cache entry is replaced, not used
    assert shipped.local_path().read_bytes() == path.read_bytes()

    shared = ship_model(path, via="shared-path")
    assert shared.ref is None and shared.local_path() == path.resolve()
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(ModelShippingError, match=r"has sha256 .* the driver shipped"):
        shared.local_path()
    with pytest.raises(ModelShippingError, match="no such file"):
        ship_model(tmp_path / "missing.onnx")
    with pytest.raises(ModelShippingError, match="via='bogus'"):
        ship_model(path, via="bogus")  # type: ignore[arg-type]


@pytest.mark.usefixtures("ray_cluster")
def test_external_data_models_need_a_shared_path(tmp_path) -> None:
    import onnx

    path = _mlp(tmp_path / "mlp.onnx", "N")
    model = onnx.load(path)
    onnx.save(model, tmp_path / "ext.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="ext.data", size_threshold=0)
    with pytest.raises(ModelShippingError, match="external data"):
        ship_model(tmp_path / "ext.onnx")
    assert ship_model(tmp_path / "ext.onnx", via="shared-path").shared_path


@pytest.mark.usefixtures("ray_cluster")
def test_the_readme_snippet_runs_as_written(tmp_path, make_images, monkeypatch) -> None:
    """spawnml-ray/README.md's Python block, run in a folder holding images/."""
    import re
    from pathlib import Path

    from spawnml_pipelines import pipeline

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    paths = make_images(tmp_path / "images", 4, seed=13, nested=False)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)
    rows = {Path(r["path"]).name: r for r in scope["ds"].take_all()}
    pipe = pipeline("classify", backend="cpu", progress=False)
    for path in paths:
        best = pipe(path)[0]
        row = rows[path.name]
        assert row["error"] == "" and (row["label"], row["class_index"]) == \
            (best.label, best.index)
        assert row["score"] == pytest.approx(best.score, rel=1e-5)
