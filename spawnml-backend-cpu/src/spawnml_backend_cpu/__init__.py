"""spawnml's CPU backend: kernel IR executed as vectorised numpy."""

from .backend import CPUBackend

__all__ = ["CPUBackend"]
