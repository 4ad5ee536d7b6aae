"""The conformance suite's plugin entry point loads."""

from __future__ import annotations

from importlib import metadata

from spawnml.plugins import PluginManager


def test_conformance_plugin_loads_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"conformance"})
    (record,) = pm.records
    assert record.loaded and not record.error, record.error
    assert record.distribution == "spawnml-conformance"
    assert record.version == metadata.version("spawnml-conformance")
    assert record.value == "spawnml_conformance.plugin"
