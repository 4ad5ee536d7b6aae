"""The official ONNX node tests through the onnx.backend adapter: on every backend the pass
count must not fall below the threshold recorded in docs/onnx-node-tests.md."""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from graph_helpers import chain_model, chain_reference

from spawnml.onnx_backend import SpawnMLBackend, for_backend

DOC = Path(__file__).resolve().parents[3] / "docs" / "onnx-node-tests.md"


def test_adapter_prepares_and_runs_a_model() -> None:
    x = np.ones((2, 4), np.float32)
    rep = SpawnMLBackend.prepare(chain_model(), backend="cpu")
    np.testing.assert_allclose(rep.run([x])[0], chain_reference(x), rtol=1e-6)
    np.testing.assert_allclose(for_backend("cpu").run_model(chain_model(), {"x": x})[0],
                               chain_reference(x), rtol=1e-6)  # fmt: skip
    assert SpawnMLBackend.supports_device("CPU")


def _thresholds() -> dict[str, int]:
    found = re.search(r"<!-- threshold: ([^>]*?) -->", DOC.read_text())
    assert found, f"{DOC} has no threshold line"
    return {b: int(n) for b, n in re.findall(r"(\w+)=(\d+)", found.group(1))}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(_thresholds()))
def test_pass_count_meets_the_recorded_threshold(backend: str) -> None:
    """The whole set on each backend of the document (skipped where it is not installed)."""
    from spawnml import get_available_backends
    from spawnml.testing.onnx_session_tests import run_all

    if backend not in get_available_backends():
        pytest.skip(f"backend {backend!r} is not available here")
    logging.disable(logging.WARNING)
    try:
        counts = Counter(r.status for r in run_all(backend))
    finally:
        logging.disable(logging.NOTSET)
    assert counts["pass"] >= _thresholds()[backend], dict(counts)
    assert counts["timeout"] == 0, dict(counts)


def test_prepare_takes_backends_and_refuses_unknown_options() -> None:
    """An option the adapter ignored once made every device column run on cpu."""
    from onnx import TensorProto, helper

    from spawnml.errors import InvalidInputError

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = SpawnMLBackend.prepare(model, backends=["wasm"])
    assert rep.session.get_providers() == ["wasm"]
    with pytest.raises(InvalidInputError, match=r"unknown option.*backendz"):
        SpawnMLBackend.prepare(model, backendz=["wasm"])
