"""com.microsoft MatMulNBits (2/4/8-bit block-quantised weights unpacked inside the kernel)
against onnxruntime's CPU provider on every available backend, and bad-input errors."""

from __future__ import annotations

import numpy as np
import pytest
from contrib_oracle import check_case, node_model, op_cases, run_spawnml

from spawnml.errors import SpawnMLError, UnsupportedOpError
from spawnml_ops.contrib.matmul_nbits import MatMulNBits, quantize_blockwise


@pytest.mark.parametrize("op,case,backend", op_cases([MatMulNBits]))
def test_matches_onnxruntime(op, case, backend) -> None:
    check_case(op, case, backend)


def _bad(inputs, attrs, match: str, error=SpawnMLError) -> None:
    model = node_model("MatMulNBits", "com.microsoft", inputs, attrs, 1, name="bad")
    with pytest.raises(error, match=rf"MatMulNBits node 'bad'.*{match}"):
        run_spawnml(model, inputs, "cpu")


def test_bad_inputs_and_attributes_name_the_node() -> None:
    a = np.ones((2, 64), np.float32)
    w, s, z = quantize_blockwise(np.empty((64, 5)), 4, 32)
    attrs = {"K": 64, "N": 5, "bits": 4, "block_size": 32}
    _bad([a, w, s, z], {**attrs, "block_size": 24}, "block_size")
    _bad([a, w, s, z], {**attrs, "bits": 3}, "bits")
    _bad([a, w[:4], s, z], attrs, "B")
    _bad([a, w, s[:3], z], attrs, "scales")
    _bad([a, w, s, z], {"N": 5, "bits": 4, "block_size": 32}, "'K'")
    _bad([a, w, s, z, np.zeros(64, np.int32)], attrs, "g_idx", UnsupportedOpError)
