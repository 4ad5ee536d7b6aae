"""The plugin manager: each entry point on its own, errors recorded, names checked, filtered."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from spawnml import hookimpl, plugins
from spawnml.errors import PluginError
from spawnml.plugins import PluginManager

GOOD = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_ops(register):
    register("an op")
"""
BROKEN = """
raise RuntimeError("the example driver is missing")
"""
MISSPELLED = """
from spawnml import hookimpl

@hookimpl
def spawnml_register_backend(register):  # the hook is spawnml_register_backends
    pass
"""


@pytest.fixture
def entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install plugin modules under tmp_path and serve them as ``spawnml`` entry points."""
    monkeypatch.syspath_prepend(str(tmp_path))
    served: list[metadata.EntryPoint] = []

    def install(name: str, source: str | None, module: str | None = None) -> None:
        module = module or f"plugin_{name}_{len(served)}"
        if source is not None:
            (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        served.append(metadata.EntryPoint(name=name, value=module, group="spawnml"))

    def fake_entry_points(group: str) -> list[metadata.EntryPoint]:
        return [ep for ep in served if ep.group == group]

    monkeypatch.setattr(plugins, "metadata", SimpleNamespace(entry_points=fake_entry_points))
    yield install
    for ep in served:
        sys.modules.pop(ep.value, None)


def test_a_failing_plugin_is_recorded_and_the_others_still_load(entry_points) -> None:
    entry_points("good", GOOD)
    entry_points("broken", BROKEN)
    entry_points("absent", None, module="no_such_plugin_module")
    pm = PluginManager()
    pm.load_entry_points(only=None)
    by_name = {r.name: r for r in pm.records}
    assert by_name["good"].loaded and not by_name["good"].error
    assert by_name["good"].hooks == ["spawnml_register_ops"]
    broken = by_name["broken"]
    assert not broken.loaded
    assert broken.error.startswith("RuntimeError: the example driver is missing (")
    assert ".py:2)" in broken.error  # where it was raised
    assert by_name["absent"].error.startswith("ModuleNotFoundError")
    assert [r.name for r in pm.failed()] == ["absent", "broken"]
    registered: list[object] = []
    pm.hook.spawnml_register_ops(register=registered.append)
    assert registered == ["an op"]


def test_a_misspelled_hook_implementation_is_a_plugin_error(entry_points) -> None:
    entry_points("typo", MISSPELLED)
    pm = PluginManager()
    pm.load_entry_points(only=None)
    (record,) = pm.records
    assert not record.loaded
    assert record.error.startswith("PluginError: plugin 'typo'")
    assert "spawnml_register_backend" in record.error
    assert pm.pm.get_plugin("typo") is None  # unregistered again


def test_register_rejects_misspelled_hooks_and_wrong_arguments() -> None:
    class Typo:
        @hookimpl
        def spawnml_register_pipeline(self, register):  # missing "s"
            pass

    class WrongArgument:
        @hookimpl
        def spawnml_register_backends(self, registrar):
            pass

    pm = PluginManager()
    with pytest.raises(PluginError, match="spawnml_register_pipeline"):
        pm.register(Typo(), "typo")
    with pytest.raises(PluginError, match="registrar"):
        pm.register(WrongArgument(), "wrong")
    # the manager stays usable after rejecting plugins
    pm.register(SimpleNamespace(), "empty")
    assert pm.pm.get_plugin("empty") is not None


def test_two_plugins_with_one_name_keep_the_first(entry_points) -> None:
    entry_points("same", GOOD)
    entry_points("same", GOOD)
    pm = PluginManager()
    pm.load_entry_points(only=None)
    first, second = pm.records
    assert first.loaded and not first.error
    assert not second.loaded and second.error.startswith("PluginError: plugin 'same'")


def test_spawnml_plugins_restricts_what_loads(entry_points, monkeypatch) -> None:
    entry_points("good", GOOD)
    entry_points("broken", BROKEN)
    entry_points("other", GOOD)
    monkeypatch.setenv("SPAWNML_PLUGINS", " good , other,")
    pm = PluginManager()
    pm.load_entry_points()
    assert [r.name for r in pm.records] == ["good", "other"]
    assert all(r.loaded for r in pm.records)
    pm = PluginManager()
    pm.load_entry_points(only={"broken"})
    assert [r.name for r in pm.records] == ["broken"]


def test_plugin_records_name_their_distribution() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"ops"})
    (record,) = pm.records
    assert (record.distribution, record.value) == ("spawnml-ops", "spawnml_ops.plugin")
    assert record.version == metadata.version("spawnml-ops")
    assert record.as_dict()["hooks"] == ["spawnml_register_ops"]
