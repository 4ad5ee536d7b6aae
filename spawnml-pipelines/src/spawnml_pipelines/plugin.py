"""Entry point of the built-in pipelines."""

from __future__ import annotations

from collections.abc import Callable

from spawnml import hookimpl


@hookimpl
def spawnml_register_pipelines(register: Callable[..., None]) -> None:
    """Register every built-in pipeline (none yet: they arrive with their own issues)."""
