"""Entry point (``[project.entry-points.spawnml] example = ...``): registers the backend."""

from spawnml import hookimpl

from .backend import ExampleBackend


@hookimpl
def spawnml_register_backends(register):
    register(ExampleBackend)
