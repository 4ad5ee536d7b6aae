"""The official ONNX node test cases (shipped in the ``onnx`` wheel), run node by node.

This runs each single-node case with :func:`spawnml.execute.run_node` on one backend, so op
authors can measure an op before a full session exists. The session-level adapter
(``onnx.backend.base.Backend``) is the acceptance path.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..backend import Backend
from ..errors import SpawnMLError
from ..execute import run_node
from ..onnx_attributes import node_from_proto
from ..registry import find_op


@functools.cache
def node_cases() -> tuple:
    """All node test cases of the installed onnx version (built in memory, ~2 s)."""
    import onnx.backend.test.loader as loader

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(loader.load_node_model_tests())


@dataclass
class Outcome:
    name: str
    op_type: str
    status: str  # "pass", "fail", "unsupported", "error"
    detail: str = ""


def _arrays(values: list) -> list:
    """Some cases (Cast, CastLike) hold TensorProtos: convert them (to ml_dtypes arrays for
    float8/int4/bfloat16, which spawnml then rejects by name)."""
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for v in values]


def run_case(backend: Backend, case: object) -> Outcome:
    model = case.model  # type: ignore[attr-defined]
    graph = model.graph
    opset = {o.domain: o.version for o in model.opset_import}
    if len(graph.node) != 1:
        return Outcome(case.name, "?", "unsupported", "multi-node case: needs a session")  # type: ignore[attr-defined]
    proto = graph.node[0]
    node = node_from_proto(proto, opset.get(proto.domain, opset.get("", 0)))
    try:
        op = find_op(node.domain, node.op_type, node.opset)
    except SpawnMLError as exc:
        return Outcome(case.name, node.op_type, "unsupported", str(exc))  # type: ignore[attr-defined]
    names = [i.name for i in graph.input]
    status, detail = "pass", ""
    for inputs, expected in case.data_sets:  # type: ignore[attr-defined]
        inputs, expected = _arrays(inputs), _arrays(expected)
        feed = dict(zip(names, inputs))
        args = [feed.get(n) if n else None for n in node.inputs]
        try:
            with np.errstate(all="ignore"):
                got = run_node(backend, op, node, args)
            if len(got) == len(node.outputs):  # expected outputs skip omitted ("") ones
                got = [g for g, name in zip(got, node.outputs) if name]
        except SpawnMLError as exc:
            return Outcome(case.name, node.op_type, "error", f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - reported as a failure of this case
            return Outcome(case.name, node.op_type, "error", f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]
        for g, e in zip(got, expected):
            e = np.asarray(e)
            try:
                np.testing.assert_allclose(
                    np.asarray(g, dtype=e.dtype) if e.dtype != object else g,
                    e,
                    rtol=case.rtol,
                    atol=case.atol,
                    equal_nan=True,
                )  # type: ignore[attr-defined]
                if np.asarray(g).shape != e.shape:
                    raise AssertionError(f"shape {np.asarray(g).shape} != {e.shape}")
            except (AssertionError, TypeError, ValueError) as exc:
                status, detail = "fail", str(exc)[:400]
    return Outcome(case.name, node.op_type, status, detail)  # type: ignore[attr-defined]


def run_cases(backend: Backend, op_types: set[str] | None = None) -> Iterator[Outcome]:
    for case in node_cases():
        op_type = case.model.graph.node[0].op_type if len(case.model.graph.node) == 1 else None
        if op_types is None or op_type in op_types:
            yield run_case(backend, case)


def main() -> None:  # pragma: no cover - developer tool
    """python -m spawnml.testing.onnx_node_tests [BACKEND] [OP,OP...]"""
    import sys
    from collections import Counter

    from ..registry import get_backend

    backend = get_backend(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    ops = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    counts: Counter[str] = Counter()
    for o in run_cases(backend, ops):
        counts[o.status] += 1
        if o.status in ("fail", "error") or (ops and o.status != "pass"):
            print(f"{o.status:11s} {o.name}: {o.detail[:300]}")
    print(dict(counts))


if __name__ == "__main__":  # pragma: no cover
    main()
