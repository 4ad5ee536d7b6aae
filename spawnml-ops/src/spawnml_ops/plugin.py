"""Entry point of the built-in operator set: registers every family's OPS."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from spawnml import hookimpl

# One module per op family; each exports OPS (OpDef classes). Add new families here.
FAMILIES = [
    "elementwise", "binary", "logic", "cast",  # math, activations, comparisons, casts
    "linalg", "conv", "pool", "norm",  # MatMul/Gemm/Einsum, Conv*, pooling, normalisation
    "reduce", "softmax", "shape", "movement", "resize",  # reductions, data movement
    "generators", "quant", "rnn",  # constants and generators, quantisation, recurrent
    "control_flow",  # If/Loop/Scan/SequenceMap (host-orchestrated; bodies run as graphs)
    "sequence",  # sequences and optionals (host values)
    "attention",  # Attention, FlexAttention, RotaryEmbedding, RMSNorm, SwiGLU, ...
    "losses", "sampling", "signal", "misc",  # losses, grid/ROI sampling, DFT, the rest
    "text",  # string ops and TfIdfVectorizer (host: no device stores strings)
    "ml",  # the ai.onnx.ml domain: trees, linear models, scalers, encoders
    "contrib",  # com.microsoft: onnxruntime's LLM operators (GroupQueryAttention, MatMulNBits...)
]


def all_ops() -> list[Any]:
    ops = []
    for name in FAMILIES:
        module = importlib.import_module(f"spawnml_ops.{name}")
        ops.extend(module.OPS)
    return ops


@hookimpl
def spawnml_register_ops(register: Callable[[Any], None]) -> None:
    """Register every built-in OpDef."""
    for op in all_ops():
        register(op)
