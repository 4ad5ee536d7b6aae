"""Entry point of the webgpu backend plugin; importing it loads no native library."""

from __future__ import annotations

from collections.abc import Callable

from spawnml import hookimpl

from .backend import WebGPUBackend


@hookimpl
def spawnml_register_backends(register: Callable[[type], None]) -> None:
    register(WebGPUBackend)


@hookimpl
def spawnml_register_web_targets(register: Callable[[object], None]) -> None:
    """``spawnml export-web --backend webgpu``."""
    from .web_export import WebGPUTarget

    register(WebGPUTarget())
