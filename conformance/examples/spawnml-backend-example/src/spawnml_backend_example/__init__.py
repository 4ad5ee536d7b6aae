"""An example third-party spawnml backend: kernel IR evaluated by a numpy tree walker."""

from .backend import ExampleBackend

__all__ = ["ExampleBackend"]
