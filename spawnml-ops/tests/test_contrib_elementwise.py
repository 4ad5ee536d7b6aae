"""com.microsoft activations, FusedMatMul and the normalisation fusions against
onnxruntime's CPU provider on every available backend, plus bad-input errors."""

from __future__ import annotations

import numpy as np
import pytest
from contrib_oracle import check_case, node_model, op_cases, run_spawnml

from spawnml.errors import SpawnMLError
from spawnml_ops.contrib.activations import OPS as ACTIVATIONS
from spawnml_ops.contrib.fused_matmul import FusedMatMul
from spawnml_ops.contrib.norms import OPS as NORMS


@pytest.mark.parametrize("op,case,backend", op_cases([*ACTIVATIONS, FusedMatMul, *NORMS]))
def test_matches_onnxruntime(op, case, backend) -> None:
    check_case(op, case, backend)


def _bad(op_type: str, inputs, attrs, match: str, domain: str = "com.microsoft") -> None:
    model = node_model(op_type, domain, inputs, attrs, 1, name="bad")
    with pytest.raises(SpawnMLError, match=rf"{op_type} node 'bad'.*{match}"):
        run_spawnml(model, inputs, "cpu")


def test_bias_gelu_needs_a_last_axis_bias() -> None:
    x = np.ones((2, 4), np.float32)
    _bad("BiasGelu", [x, np.ones(3, np.float32)], {}, "bias")
    _bad("BiasGelu", [x], {}, "bias")


def test_fused_matmul_checks_inner_dims_and_flags() -> None:
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    _bad("FusedMatMul", [a, b], {}, "inner dimensions")
    _bad("FusedMatMul", [a, np.ones((3, 2), np.float32)], {"transA": 2}, "transA")


def test_skip_norm_checks_shapes() -> None:
    x, g = np.ones((2, 3, 8), np.float32), np.ones(8, np.float32)
    _bad("SkipLayerNormalization", [x, np.ones((2, 3, 4), np.float32), g], {}, "skip")
    _bad("SkipSimplifiedLayerNormalization", [x, x, np.ones(4, np.float32)], {}, "gamma")
    _bad("SimplifiedLayerNormalization", [x, np.ones(5, np.float32)], {}, "scale", domain="")
