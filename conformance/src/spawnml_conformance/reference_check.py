"""Cross-check an op's numpy reference against ``onnx.reference`` on the same case."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from spawnml import opset_history

from .cases import ConformanceCase
from .checks import DISAGREES, FAIL, PASS, SKIP, Outcome, judge


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


# Defects of onnx.reference's own implementations (by class name), on the cases they hit.
REFERENCE_DEFECTS: dict[str, tuple[Callable[[ConformanceCase], bool], str]] = {
    "Gemm_6": (
        lambda c: len(c.inputs) > 2 and c.inputs[2] is not None
        and not c.node.attrs.get("broadcast", 0) and float(c.node.attrs.get("beta", 1.0)) != 1.0,
        "onnx.reference's Gemm-6 adds C without beta when broadcast=0",
    ),
    "Pow": (
        lambda c: bool(np.any(np.isneginf(np.asarray(c.inputs[0], np.float64)))),
        "onnx.reference's Pow is numpy's, whose shortcut for exponent 0.5 gives "
        "pow(-inf, 0.5) = nan (C pow and onnxruntime: inf)",
    ),
    "GlobalMaxPool": (
        lambda c: bool(np.isnan(np.asarray(c.inputs[0], np.float64)).any()),
        "onnx.reference's GlobalMaxPool propagates NaN (np.max); onnxruntime skips NaN "
        "unless a plane is all NaN",
    ),
    "OneHot": (
        lambda c: np.asarray(c.inputs[0]).dtype.kind == "f"
        and bool(np.any(np.asarray(c.inputs[0]) != np.trunc(np.asarray(c.inputs[0])))),
        "onnx.reference's OneHot compares non-integer float indices as they are (the spec "
        "casts them to int64 first)",
    ),
}  # fmt: skip


def reference_gap(case: ConformanceCase) -> str | None:
    """Why onnx.reference cannot judge ``case``: the implementation it picks for the case's
    opset has the semantics of another epoch of the op (an unversioned class implements the
    newest one), or a known defect on such a case. None when it can."""
    node = case.node
    if node.domain not in ("", "ai.onnx"):
        return None
    try:
        from onnx.reference.ops import load_op

        impl = load_op("", node.op_type, node.opset).__name__
    except Exception:  # noqa: BLE001 - no implementation: the evaluator says so itself
        return None
    epoch = opset_history.epoch_of("", node.op_type, node.opset)
    found = re.search(r"_(\d+)$", impl)
    implemented = int(found.group(1)) if found else None
    if epoch is not None:
        if implemented is None:
            newest = opset_history.latest_epoch("", node.op_type)
            if newest is not None and epoch != newest:
                return (f"onnx.reference implements {node.op_type} with the semantics of "
                        f"opset {newest[0]} and later only; the case is at opset {node.opset}")
        elif not (epoch[0] <= implemented and (epoch[1] is None or implemented < epoch[1])):
            return (f"onnx.reference runs {impl} for opset {node.opset}, whose semantics "
                    f"(opsets {epoch[0]}-{epoch[1] or 'latest'}) differ")
    defect = REFERENCE_DEFECTS.get(impl)
    return defect[1] if defect and defect[0](case) else None


def check_reference(case: ConformanceCase) -> Outcome:
    """PASS when op.reference agrees with onnx.reference; SKIP (with why) where the latter
    cannot run the case; DISAGREES otherwise: a finding about spawnml's own reference (or
    onnx.reference), reported apart, which never fails a backend's run."""
    if case.infer_error:
        return Outcome(SKIP, case.name, None, "infer rejects the case")
    if case.raises:
        return Outcome(SKIP, case.name, None, "invalid inputs: no outputs to cross-check")
    if case.op.random:
        return Outcome(SKIP, case.name, None, "random outputs are not cross-checked")
    if case.op.domain not in ("", "ai.onnx", "ai.onnx.ml"):
        return Outcome(SKIP, case.name, None,
                       f"onnx.reference implements only the ONNX domains, not {case.op.domain!r}")
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
        return Outcome(DISAGREES, case.name, None,
                       f"reference raised {type(exc).__name__}: {exc}")
    theirs = [np.asarray(t) for t in theirs]
    outcome = judge(case.name, ours, theirs, case.rtol, case.atol)
    if outcome.status == FAIL and (gap := reference_gap(case)):
        return Outcome(SKIP, case.name, None, f"onnx.reference cannot judge it: {gap}")
    if outcome.status == FAIL:
        return Outcome(DISAGREES, case.name, outcome.max_error,
                       "op.reference disagrees with onnx.reference: " + outcome.detail)
    return Outcome(PASS, case.name, outcome.max_error)
