"""A plugin whose hook raises (or registers something invalid) is recorded with its error
against that plugin, shown by ``spawnml plugins``; every other plugin's contributions are
kept and sessions run (issue #20)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from onnx import TensorProto, helper

from spawnml import InferenceSession, cli, hookimpl, model_catalog, plugins, registry
from spawnml.plugins import PluginManager, get_plugin_manager, reset_plugin_manager

BAD_OPS = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_ops(register):
    raise RuntimeError("the ops table is corrupt")
"""
BAD_KERNELS = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_kernels(register):
    raise KeyError("no such device")
"""
NOT_AN_OP = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_ops(register):
    register("not an op")
"""
BAD_MODELS = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_models(register):
    raise ValueError("catalog server down")
"""
GOOD_MODELS = """
from pathlib import Path
from spawnml import hookimpl
from spawnml.model_catalog import CatalogModel

@hookimpl
def spawnml_register_models(register):
    register(CatalogModel("isolation-test-model", "a test entry", "test", "MIT", "1 KB",
                          lambda: Path("/nonexistent"), lambda: None))
"""
FAKE_PLUGINS = {"bad_ops": BAD_OPS, "bad_kernels": BAD_KERNELS, "not_an_op": NOT_AN_OP,
                "bad_models": BAD_MODELS, "good_models": GOOD_MODELS}  # fmt: skip


@pytest.fixture
def with_fake_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The real ``ops`` and ``cpu`` plugins beside the throw-away ones above, served as
    ``spawnml`` entry points to a fresh process-wide plugin manager."""
    monkeypatch.syspath_prepend(str(tmp_path))
    real = [ep for ep in metadata.entry_points(group="spawnml") if ep.name in ("ops", "cpu")]
    served = list(real)
    for name, source in FAKE_PLUGINS.items():
        (tmp_path / f"isolation_{name}.py").write_text(textwrap.dedent(source))
        served.append(metadata.EntryPoint(name=name, value=f"isolation_{name}", group="spawnml"))

    def fake_entry_points(group: str) -> list[metadata.EntryPoint]:
        return [ep for ep in served if ep.group == group]

    monkeypatch.delenv("SPAWNML_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "metadata", SimpleNamespace(entry_points=fake_entry_points))
    reset_plugin_manager()
    yield
    monkeypatch.undo()
    reset_plugin_manager()
    for name in FAKE_PLUGINS:
        sys.modules.pop(f"isolation_{name}", None)


def relu_session() -> InferenceSession:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return InferenceSession(model.SerializeToString(), backends=["cpu"])


def errors() -> dict[str, str]:
    return {r.name: r.error for r in get_plugin_manager().records}


@pytest.mark.usefixtures("with_fake_plugins")
def test_sessions_run_beside_plugins_whose_hooks_raise() -> None:
    x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
    (y,) = relu_session().run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    found = errors()
    assert found["bad_ops"].startswith(
        "spawnml_register_ops failed: RuntimeError: the ops table is corrupt ("
    )
    assert "isolation_bad_ops.py:6)" in found["bad_ops"]
    assert found["bad_kernels"].startswith(
        "spawnml_register_kernels failed: KeyError: 'no such device' ("
    )
    assert found["not_an_op"].startswith(
        "spawnml_register_ops failed: PluginError: register_ops got 'not an op', not an OpDef"
    )
    assert found["ops"] == found["cpu"] == ""
    assert registry.find_op("", "Relu", 17) is not None  # the ops plugin's ops are all there
    assert registry.backend_kernels("cpu", "", "MatMul")  # and the cpu plugin's kernels


@pytest.mark.usefixtures("with_fake_plugins")
def test_a_failing_models_hook_keeps_the_other_plugins_models() -> None:
    names = model_catalog.catalog()
    assert "isolation-test-model" in names  # the good plugin's
    assert errors()["bad_models"].startswith(
        "spawnml_register_models failed: ValueError: catalog server down ("
    )


@pytest.mark.usefixtures("with_fake_plugins")
def test_spawnml_plugins_names_each_failing_plugin_with_its_error(capsys) -> None:
    registry.collect_all()
    assert cli.main(["plugins", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["bad_ops"]["loaded"]
    assert records["bad_ops"]["hooks"] == ["spawnml_register_ops"]
    assert "RuntimeError: the ops table is corrupt" in records["bad_ops"]["error"]
    assert "KeyError: 'no such device'" in records["bad_kernels"]["error"]
    assert records["ops"]["error"] == ""
    assert cli.main(["plugins"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert any(line.startswith("bad_kernels") and "spawnml_register_kernels failed: KeyError"
               in line for line in table)  # fmt: skip
    assert any(line.startswith("ops ") and line.rstrip().endswith("ok") for line in table)


def test_an_error_is_recorded_once_however_often_the_hook_runs() -> None:
    class Flaky:
        @hookimpl
        def spawnml_register_pipelines(self, register: Callable[..., None]) -> None:
            raise RuntimeError("flaky")

    class Good:
        @hookimpl
        def spawnml_register_pipelines(self, register: Callable[..., None]) -> None:
            register(("task", object))

    pm = PluginManager()
    pm.register(Good(), "good")
    pm.register(Flaky(), "flaky")
    for _ in range(3):
        got: list[tuple] = []
        pm.hook.spawnml_register_pipelines(register=got.append)
        assert got == [("task", object)]
    (flaky,) = pm.failed()
    assert flaky.name == "flaky" and flaky.error.count("RuntimeError: flaky") == 1
