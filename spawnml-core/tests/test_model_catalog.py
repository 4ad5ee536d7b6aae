"""Built-in model names: resolution, errors, and models that plugins add."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spawnml import hookimpl
from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.model_catalog import CatalogModel, catalog, resolve_model
from spawnml.plugins import get_plugin_manager, reset_plugin_manager

onnx = pytest.importorskip("onnx")


@pytest.fixture
def plugin_model(tmp_path: Path) -> Iterator[Path]:
    """A plugin that registers ``tiny_relu``, a model file it writes on first use."""
    from onnx import TensorProto, helper

    path = tmp_path / "tiny_relu.onnx"
    built: list[int] = []

    def locate() -> Path:
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        built.append(1)
        return path

    class Models:
        @hookimpl
        def spawnml_register_models(self, register: Callable[[Any], None]) -> None:
            register(CatalogModel("tiny_relu", "a Relu", "test plugin", "CC0", "1 KB", locate,
                                  lambda: path if path.exists() else None))

    reset_plugin_manager()
    get_plugin_manager().register(Models(), "test-models")
    yield path
    reset_plugin_manager()


def test_names_resolve_to_files_in_the_cache() -> None:
    path = resolve_model("squeezenet1_1")
    assert path.is_file() and path.suffix == ".onnx"
    assert catalog()["squeezenet1_1"].cached() == path
    assert resolve_model(str(path)) == path  # a path stays a path


def test_a_plugin_adds_a_name_that_every_model_argument_takes(plugin_model: Path) -> None:
    import numpy as np

    from spawnml import InferenceSession

    entry = catalog()["tiny_relu"]
    assert entry.cached() is None and entry.as_dict()["license"] == "CC0"
    session = InferenceSession("tiny_relu", backends="cpu")
    assert plugin_model.exists() and entry.cached() == plugin_model
    (y,) = session.run(None, {"x": np.array([-1, 0, 2], np.float32)})
    np.testing.assert_array_equal(y, [0, 0, 2])


def test_unknown_references_say_what_a_model_may_be(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"not a file, a URL or a built-in name.*resnet50"):
        resolve_model("resnet51")
    with pytest.raises(InvalidInputError, match=r"model file 'x/y\.onnx' does not exist"):
        resolve_model("x/y.onnx")
    with pytest.raises(InvalidInputError, match="is a directory"):
        resolve_model(tmp_path)
    from spawnml import InferenceSession

    with pytest.raises(InvalidModelError, match="does not exist"):
        InferenceSession("missing.onnx", backends="cpu")
