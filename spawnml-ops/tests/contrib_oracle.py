"""Shared helpers of the contrib-op tests: single-node models run by onnxruntime's CPU
provider (the oracle) and by spawnml on each available backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import spawnml
from spawnml.op import Node, OpCase, OpDef

BACKENDS = ("cpu", "wasm", "webgpu", "webgl", "opencl")


def node_model(op_type: str, domain: str, inputs: Sequence[np.ndarray | None],
               attrs: dict[str, Any], n_outputs: int, *, name: str = "n0") -> bytes:
    """A serialized model of one node; omitted inputs get an empty name."""
    import onnx
    from onnx import helper

    names = [f"i{k}" if a is not None else "" for k, a in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = [f"o{k}" for k in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain, name=name, **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(names, inputs) if n]
    imports = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    graph = helper.make_graph([node], "g", infos, [onnx.ValueInfoProto(name=n) for n in outs])
    return helper.make_model(graph, opset_imports=imports, ir_version=10).SerializeToString()


def feeds(inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    return {f"i{k}": a for k, a in enumerate(inputs) if a is not None}


def run_onnxruntime(model: bytes, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds(inputs))


def run_spawnml(model: bytes, inputs: Sequence[np.ndarray | None], backend: str
                ) -> list[np.ndarray]:
    if backend not in spawnml.get_available_backends():
        pytest.skip(f"backend {backend} is not available")
    session = spawnml.InferenceSession(model, backends=[backend], strict=True)
    names = [o.name for o in session.get_outputs()]
    return session.run(names, feeds(inputs))


def assert_close(got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float,
                 atol: float, what: str, rows: Any = None) -> None:
    """Each output close to the oracle's (``rows``: an index selecting the compared part of
    output 0, for outputs onnxruntime leaves unspecified elsewhere)."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} output {i}: {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what} output {i}: {g.dtype} != {w.dtype}"
        if rows is not None and i == 0:
            g, w = g[rows], w[rows]
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=f"{what} output {i}")


def check_case(op: OpDef, case: OpCase, backend: str, rows: Any = None) -> None:
    """The case on ``backend`` and op.reference both match onnxruntime within the case's
    tolerances."""
    model = node_model(op.op_type, op.domain, case.inputs, dict(case.attrs), case.n_outputs)
    want = run_onnxruntime(model, case.inputs)
    names = [f"i{k}" if a is not None else "" for k, a in enumerate(case.inputs)]
    node = Node(op.op_type, names, [f"o{k}" for k in range(case.n_outputs)],
                dict(case.attrs), name="n0", domain=op.domain, opset=1)
    ref = op.reference(node, case.inputs)
    assert_close(ref, want, case.rtol, case.atol, f"{case.name} reference", rows)
    got = run_spawnml(model, case.inputs, backend)
    assert_close(got, want, case.rtol, case.atol, f"{case.name} on {backend}", rows)


def op_cases(ops: Sequence[type[OpDef]]) -> list[Any]:
    """pytest params (op, case, backend) for every declared case on every backend."""
    out = []
    for cls in ops:
        op = cls()
        for case in op.cases():
            for backend in BACKENDS:
                out.append(pytest.param(op, case, backend,
                                        id=f"{op.op_type}-{case.name}-{backend}"))
    return out
