"""Entry point of the built-in pipelines: registers the pipeline classes and CLI commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spawnml import hookimpl
from spawnml.plugins import get_plugin_manager


@hookimpl
def spawnml_register_pipelines(register: Callable[..., None]) -> None:
    """Register every built-in pipeline: ``register(task, PipelineClass)``."""
    from . import PIPELINES

    for task, cls in PIPELINES.items():
        register(task, cls)


@hookimpl
def spawnml_register_models(register: Callable[..., None]) -> None:
    """Add ``depth_tiny``, the depth pipeline's generated model, to the model catalog."""
    from .models import depth_tiny

    register(depth_tiny())


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """Add ``spawnml classify|depth|style|remove-bg|upscale|generate``."""
    from .cli import add_commands

    add_commands(cli)


def registered_pipelines() -> dict[str, type]:
    """Task -> pipeline class: the built-in ones plus every plugin's (third-party tasks)."""
    from . import PIPELINES

    found: dict[str, type] = dict(PIPELINES)
    get_plugin_manager().pm.hook.spawnml_register_pipelines(
        register=lambda task, cls: found.setdefault(task, cls))
    return found
