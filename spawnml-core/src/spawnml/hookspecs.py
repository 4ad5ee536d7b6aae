"""The hooks a spawnml plugin may implement (register-callback style).

A plugin module decorates functions with ``spawnml.hookimpl`` and is listed under the
entry-point group ``spawnml``. Each hook receives a ``register`` callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "spawnml"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def spawnml_register_backends(register: Callable[[type], None]) -> None:
    """Register Backend subclasses: ``register(BackendClass)``."""


@hookspec
def spawnml_register_ops(register: Callable[[Any], None]) -> None:
    """Register operator definitions: ``register(op)``, ``op`` an ``spawnml.op.OpDef``
    subclass (instantiated once, without arguments) or instance; anything else raises
    PluginError. Ops are keyed by (``domain``, ``op_type``); see docs/writing-an-op.md."""


@hookspec
def spawnml_register_kernels(register: Callable[..., None]) -> None:
    """Register a backend's own kernel for an op: ``register(kernel)``, ``kernel`` a
    ``spawnml.op.BackendKernel`` subclass (instantiated once) or instance, which names its
    ``backend``, ``domain`` and ``op_type``."""


@hookspec
def spawnml_register_pipelines(register: Callable[..., None]) -> None:
    """Register pipelines: ``register(task_name, PipelineClass)``."""


@hookspec
def spawnml_register_commands(cli: Any) -> None:
    """Add subcommands to the ``spawnml`` CLI (an argparse subparsers object)."""


@hookspec
def spawnml_register_models(register: Callable[[Any], None]) -> None:
    """Add built-in model names: ``register(spawnml.model_catalog.CatalogModel(...))``; every
    command and API that takes a model path then also takes the name."""


@hookspec
def spawnml_register_web_targets(register: Callable[[Any], None]) -> None:
    """Add targets of ``spawnml export-web``: ``register(target)``, a
    ``spawnml.export.WebTarget`` (a backend configured for browsers, and the writer of its
    kernels, plan and JavaScript runtime)."""
