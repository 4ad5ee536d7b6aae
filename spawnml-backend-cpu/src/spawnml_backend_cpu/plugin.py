"""Entry point of the cpu backend plugin."""

from spawnml import hookimpl

from .backend import CPUBackend


@hookimpl
def spawnml_register_backends(register):
    register(CPUBackend)
