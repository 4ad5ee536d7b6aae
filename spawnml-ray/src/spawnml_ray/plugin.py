"""Entry point of spawnml-ray: adds ``spawnml batch``."""

from __future__ import annotations

from typing import Any

from spawnml import hookimpl


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """Add ``spawnml batch``."""
    from .cli import add_command

    add_command(cli)
