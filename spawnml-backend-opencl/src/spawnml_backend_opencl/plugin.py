"""Entry point of the opencl backend plugin; importing it loads no native library."""

from __future__ import annotations

from collections.abc import Callable

from spawnml import hookimpl

from .backend import OpenCLBackend


@hookimpl
def spawnml_register_backends(register: Callable[[type], None]) -> None:
    register(OpenCLBackend)
