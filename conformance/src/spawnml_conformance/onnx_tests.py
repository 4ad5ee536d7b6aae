"""The official ONNX node tests (from the onnx wheel) on one spawnml backend.

The session-level ``onnx.backend.base.Backend`` adapter (``spawnml.onnx_backend``) runs
them when it is installed; until then they run node by node through ``run_node``
(``spawnml.testing.onnx_node_tests``). Which path ran is recorded in the report.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from spawnml.backend import Backend

from .checks import FAIL, HOST, NOT_IMPLEMENTED, PASS, Outcome
from .tolerances import Tolerance, compare

ADAPTER = "spawnml.onnx_backend (onnx.backend.base.Backend adapter)"
FALLBACK = "spawnml.testing.onnx_node_tests (node by node through run_node)"


def adapter_module() -> tuple[Any | None, str]:
    """The adapter module and a description of the path that will run."""
    try:
        module = importlib.import_module("spawnml.onnx_backend")
    except ModuleNotFoundError as exc:
        if exc.name != "spawnml.onnx_backend":
            return None, f"{FALLBACK}; the adapter failed to import: {exc}"
        return None, FALLBACK
    except Exception as exc:  # noqa: BLE001 - a broken adapter is reported, not hidden
        return None, f"{FALLBACK}; the adapter failed to import: {type(exc).__name__}: {exc}"
    return module, ADAPTER


def single_node_tests(op_types: set[str]) -> Iterator[Any]:
    from spawnml.testing.onnx_node_tests import node_cases

    for test in node_cases():
        nodes = test.model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in op_types:
            yield test


def _prepare(module: Any, model: Any, backend: str) -> Any:
    if hasattr(module, "for_backend"):  # an adapter class bound to one spawnml backend
        return module.for_backend(backend).prepare(model)
    return module.prepare(model, backend=backend)


def _max_error(got: Any, expected: Any) -> float:
    """The largest absolute error of a float tensor output (0 for anything else: integers,
    strings, sequences and optionals match exactly or fail)."""
    from spawnml.onnx_backend import _array

    if isinstance(expected, list) or expected is None:
        return 0.0
    e = np.asarray(_array(expected))
    if e.dtype.kind == "V" and "float" in e.dtype.name:  # ml_dtypes: bfloat16, float8...
        e = e.astype(np.float32)
    if e.dtype.kind != "f":
        return 0.0
    return compare(np.asarray(got).astype(e.dtype), e, Tolerance(np.inf, np.inf)).max_error


def _on_host(session: Any) -> list[str]:
    """Why nodes of the (last run's) plan were computed on the host instead of the backend."""
    placement = session.placement()
    return [placement.reasons.get(node) or f"{node}: {kind}"
            for node, kind in placement.kinds.items() if kind in ("host", "reference")]


def _run_adapter(module: Any, backend: Backend, test: Any) -> Outcome:
    from spawnml.errors import UnsupportedOpError
    from spawnml.testing.onnx_session_tests import output_problem

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            rep = _prepare(module, test.model, backend.name)
            ran_on = rep.session.get_providers()
            if ran_on != [backend.name]:
                return Outcome(FAIL, test.name, None,
                               f"the adapter's session ran on {ran_on}, not [{backend.name!r}]")
            worst = 0.0
            for inputs, expected in test.data_sets:
                got = rep.run(inputs)
                for g, e in zip(got, expected):
                    problem = output_problem(g, e, test.rtol, test.atol)
                    if problem:
                        return Outcome(FAIL, test.name, None, problem)
                    worst = max(worst, _max_error(g, e))
            host = _on_host(rep.session)
    except UnsupportedOpError as exc:
        return Outcome(NOT_IMPLEMENTED, test.name, None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a failure of this test only
        return Outcome(FAIL, test.name, None, f"{type(exc).__name__}: {exc}"[:500])
    if host:
        return Outcome(HOST, test.name, worst, "computed on the host: " + "; ".join(host))
    return Outcome(PASS, test.name, worst)


def run_tests(backend: Backend, op_types: set[str]) -> Iterator[tuple[str, Outcome]]:
    """(op_type, outcome) for every single-node ONNX test of ``op_types``."""
    module, _ = adapter_module()
    if module is not None:
        for test in single_node_tests(op_types):
            yield test.model.graph.node[0].op_type, _run_adapter(module, backend, test)
        return
    from spawnml.testing.onnx_node_tests import run_case

    status = {"pass": PASS, "fail": FAIL, "error": FAIL, "unsupported": NOT_IMPLEMENTED}
    for test in single_node_tests(op_types):
        o = run_case(backend, test)
        yield o.op_type, Outcome(status[o.status], o.name, None, o.detail)
