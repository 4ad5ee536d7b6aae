"""Entry point of the webgl backend plugin; importing it loads no native library."""

from __future__ import annotations

from collections.abc import Callable

from spawnml import hookimpl

from .backend import WebGLBackend


@hookimpl
def spawnml_register_backends(register: Callable[[type], None]) -> None:
    register(WebGLBackend)


@hookimpl
def spawnml_register_web_targets(register: Callable[[object], None]) -> None:
    """``spawnml export-web --backend webgl``."""
    from .web_export import WebGLTarget

    register(WebGLTarget())
