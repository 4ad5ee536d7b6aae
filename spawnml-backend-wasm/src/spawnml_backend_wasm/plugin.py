"""Entry point of the wasm backend plugin; importing it loads no native library."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spawnml import hookimpl

from .backend import WasmBackend


@hookimpl
def spawnml_register_backends(register: Callable[[type], None]) -> None:
    register(WasmBackend)


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """Add ``spawnml export-wasm``."""
    from .cli import add_commands

    add_commands(cli)


@hookimpl
def spawnml_register_web_targets(register: Callable[[object], None]) -> None:
    """``spawnml export-web --backend wasm``."""
    from .web_export import WasmTarget

    register(WasmTarget())
