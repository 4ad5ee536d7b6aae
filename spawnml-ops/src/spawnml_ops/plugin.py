"""Entry point of the built-in operator set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spawnml import hookimpl


@hookimpl
def spawnml_register_ops(register: Callable[[Any], None]) -> None:
    """Register every built-in OpDef (none yet: operators arrive with the op-set issues)."""
