"""Entry point (``[project.entry-points.spawnml] example-ops = ...``): registers the ops."""

from spawnml import hookimpl

from .swish import Swish


@hookimpl
def spawnml_register_ops(register):
    register(Swish)  # the class (instantiated once by spawnml) or an instance: both work
