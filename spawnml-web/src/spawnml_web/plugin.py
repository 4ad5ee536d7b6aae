"""Entry point of spawnml-web: the ``spawnml export-web`` command."""

from __future__ import annotations

from typing import Any

from spawnml import hookimpl


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """Add ``spawnml export-web``."""
    from .cli import add_commands

    add_commands(cli)
