"""Cross-check an op's numpy reference against ``onnx.reference`` on the same case."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .cases import ConformanceCase
from .checks import FAIL, PASS, SKIP, Outcome, judge


def _attribute(value: Any) -> Any:
    from onnx import numpy_helper

    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def onnx_model(case: ConformanceCase) -> Any:
    """A one-node ONNX model computing ``case`` (inputs as graph inputs)."""
    from onnx import helper

    node = case.node
    proto = helper.make_node(node.op_type, node.inputs, node.outputs, domain=node.domain or None,
                             **{k: _attribute(v) for k, v in node.attrs.items()})
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in zip(node.inputs, case.inputs) if a is not None]
    outputs = [helper.make_tensor_value_info(n, o.dtype.onnx, None)
               for n, o in zip(node.outputs, case.outputs)]
    graph = helper.make_graph([proto], "case", inputs, outputs)
    opsets = [helper.make_opsetid(node.domain or "", node.opset)]
    if node.domain:
        opsets.append(helper.make_opsetid("", 21))
    return helper.make_model(graph, opset_imports=opsets)


def check_reference(case: ConformanceCase) -> Outcome:
    """PASS when op.reference agrees with onnx.reference; SKIP (with why) where the latter
    cannot run the case."""
    if case.infer_error:
        return Outcome(SKIP, case.name, None, "infer rejects the case")
    if case.op.random:
        return Outcome(SKIP, case.name, None, "random outputs are not cross-checked")
    if case.node.subgraphs or any(hasattr(v, "node") for v in case.node.attrs.values()):
        return Outcome(SKIP, case.name, None, "subgraph attributes are not cross-checked")
    try:
        from onnx.reference import ReferenceEvaluator

        model = onnx_model(case)
        feeds = {n: a for n, a in zip(case.node.inputs, case.inputs) if a is not None}
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            theirs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - onnx.reference lacks many op/dtype combinations
        return Outcome(SKIP, case.name, None,
                       f"onnx.reference cannot run it: {type(exc).__name__}: {str(exc)[:120]}")
    try:
        with np.errstate(all="ignore"):
            ours = case.op.reference(case.node, case.inputs)
    except Exception as exc:  # noqa: BLE001
        return Outcome(FAIL, case.name, None, f"reference raised {type(exc).__name__}: {exc}")
    theirs = [np.asarray(t) for t in theirs]
    outcome = judge(case.name, ours, theirs, case.rtol, case.atol)
    if outcome.status == FAIL:
        outcome.detail = "op.reference disagrees with onnx.reference: " + outcome.detail
    return outcome if outcome.status == FAIL else Outcome(PASS, case.name, outcome.max_error)
