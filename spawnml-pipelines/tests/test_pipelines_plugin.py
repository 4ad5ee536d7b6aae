"""The built-in pipelines register through their entry point."""

from __future__ import annotations

from spawnml.plugins import PluginManager


def test_pipelines_plugin_loads_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"pipelines"})
    (record,) = pm.records
    assert record.loaded and not record.error, record.error
    assert record.distribution == "spawnml-pipelines"
    assert record.hooks == ["spawnml_register_pipelines"]
    registered: list[tuple[object, ...]] = []
    pm.hook.spawnml_register_pipelines(register=lambda *args: registered.append(args))
    assert registered == []  # pipelines arrive with their own issues
