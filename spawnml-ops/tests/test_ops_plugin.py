"""The built-in operator set registers through its entry point."""

from __future__ import annotations

from importlib import metadata

from spawnml.plugins import PluginManager


def test_ops_plugin_loads_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"ops"})
    (record,) = pm.records
    assert record.loaded and not record.error, record.error
    assert (record.distribution, record.version) == ("spawnml-ops", metadata.version("spawnml-ops"))
    assert record.hooks == ["spawnml_register_ops"]
    registered: list[object] = []
    pm.hook.spawnml_register_ops(register=registered.append)
    names = {op.op_type for op in registered}
    assert {"Relu", "Add"} <= names


def test_registry_finds_ops_by_opset() -> None:
    import pytest

    from spawnml.errors import UnsupportedOpError
    from spawnml.registry import find_op

    assert find_op("", "Relu", 13).op_type == "Relu"
    with pytest.raises(UnsupportedOpError, match="opset 5"):
        find_op("", "Relu", 5)
    with pytest.raises(UnsupportedOpError, match="not implemented"):
        find_op("com.example", "Nope", 1)
