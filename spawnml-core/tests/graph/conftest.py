"""Fixtures for graph-runtime tests (helpers live in graph_helpers.py next to this file)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spawnml import registry
from spawnml.plugins import get_plugin_manager, reset_plugin_manager

sys.path.insert(0, str(Path(__file__).parent))  # tests import graph_helpers


@pytest.fixture
def extra_plugin() -> Iterator[Any]:
    """Register a throw-away plugin object for one test; everything is forgotten after."""
    reset_plugin_manager()

    def register(**hooks: Any) -> None:
        plugin = SimpleNamespace(**hooks)
        get_plugin_manager().register(plugin, "graph_test_plugin")
        registry.reset()

    yield register
    reset_plugin_manager()
