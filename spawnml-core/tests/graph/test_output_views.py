"""Outputs that are views of one buffer (Reshape of Reshape, both returned) all stay
readable, on the normal path and on replays."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import helper

from spawnml import InferenceSession, get_available_backends


@pytest.mark.parametrize("backend", [b for b in ("cpu", "opencl", "wasm")
                                     if b in get_available_backends()])  # fmt: skip
def test_two_outputs_viewing_one_intermediate(backend):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"]),
    ]
    inits = {"s1": np.array([6, 4], np.int64), "s2": np.array([24], np.int64)}
    model = make_model(nodes, [("x", F, [2, 3, 4])], [("a", F, [6, 4]), ("b", F, [24])], inits)
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    session = InferenceSession(model.SerializeToString(), backends=[backend])
    for _ in range(3):
        a, b = session.run(None, {"x": x})
        np.testing.assert_array_equal(a, np.maximum(x, 0).reshape(6, 4))
        np.testing.assert_array_equal(b, np.maximum(x, 0).reshape(24))
