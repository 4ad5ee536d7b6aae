"""The graph runtime: ONNX import, passes, placement, memory planning and execution."""

from __future__ import annotations

from .importer import import_model
from .ir import Graph, Value
from .passes import PassReport, optimise
from .plan import HOST

__all__ = ["Graph", "Value", "import_model", "optimise", "PassReport", "HOST"]
