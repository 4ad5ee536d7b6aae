"""The test-model generators and the fetched-model rewrites (no network, seconds)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml.testing.models import GENERATED, cache_dir, generated_model, mismatches
from spawnml.testing.models.fetched import FETCHED
from spawnml.testing.models.repair import float16_to_float32, toposort


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path))
    return tmp_path


def test_cache_dir_follows_environment(cache):
    assert cache_dir() == cache / "models"


def test_generated_models_are_deterministic_and_cached(cache):
    path = generated_model("espcn_x3")
    first = path.read_bytes()
    stamp = path.stat().st_mtime_ns
    assert generated_model("espcn_x3") == path and path.stat().st_mtime_ns == stamp  # reused
    assert generated_model("espcn_x3", rebuild=True).read_bytes() == first  # same bytes
    assert path.is_relative_to(cache)


def test_every_generated_model_has_inputs_matching_its_graph():
    for spec in GENERATED.values():
        model = spec.build(**spec.params)
        declared = {i.name: i for i in model.graph.input}
        for name, array in spec.inputs().items():
            dims = [d.dim_value for d in declared[name].type.tensor_type.shape.dim]
            assert list(array.shape) == dims, spec.name
        assert model.opset_import[0].version == 17


def test_generator_key_changes_with_parameters():
    spec = GENERATED["squeezenet1_1"]
    other = type(spec)(spec.name, spec.build, {"seed": 99}, spec.make_inputs)
    assert spec.key() != other.key()


def test_fetched_inputs_are_deterministic():
    for spec in FETCHED.values():
        a, b = spec.inputs(), spec.inputs()
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_fetched_feeds_draw_typed_values():
    """Per-input dtypes and ranges: token ids in the vocabulary, a padded mask, a scalar
    sample rate, audio within its scale."""
    text = FETCHED["minilm_l3"].inputs()
    assert text["input_ids"].dtype == np.int64 and 0 <= text["input_ids"].min()
    assert text["input_ids"].max() < 30522
    assert text["attention_mask"].tolist() == [[1] * 24 + [0] * 8]
    vad = FETCHED["silero_vad"].inputs()
    assert vad["sr"].shape == () and vad["sr"].dtype == np.int64 and int(vad["sr"]) == 16000
    assert vad["input"].dtype == np.float32 and np.abs(vad["input"]).max() <= 0.5
    pixels = FETCHED["ddddocr_det"].inputs()["images"]
    assert pixels.min() >= 0 and pixels.max() > 200


def test_free_dims_names_every_io_dimension():
    from spawnml.testing.models.fetched import free_dims

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [10, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 3, 32, 32])
    model = free_dims(helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])))  # fmt: skip
    for value in (*model.graph.input, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == [f"{value.name}_{i}" for i in range(4)]


def _fp16_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.array([[0.5, -1.25], [2.0, 0.1]], np.float16), "w")
    nodes = [
        helper.make_node("Add", ["h", "h"], ["y16"]),  # consumer listed before producers
        helper.make_node("MatMul", ["x16", "w"], ["h"]),
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "fp16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        initializer=[w],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1, 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_toposort_orders_nodes():
    model = toposort(_fp16_model())
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["Cast", "MatMul", "Add", "Cast"]


def test_float16_to_float32_computes_the_same_network_in_float32():
    ort = pytest.importorskip("onnxruntime")
    model = float16_to_float32(toposort(_fp16_model()))
    onnx.checker.check_model(model, full_check=True)
    assert all(t.data_type == TensorProto.FLOAT for t in model.graph.initializer)
    x = np.array([[1.5, -3.0]], np.float32)
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    w = np.array([[0.5, -1.25], [2.0, 0.1]], np.float16).astype(np.float32)
    assert not mismatches(got, [2 * (x @ w)], ["y"], rel=1e-6)
