"""norm operators."""

from __future__ import annotations

from spawnml.op import OpDef

OPS: list[type[OpDef]] = []
