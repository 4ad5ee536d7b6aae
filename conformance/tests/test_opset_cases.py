"""Per-opset conformance cases (issue #27): every op whose semantics change across opsets
has cases in every epoch it supports, and backend kernels are held to the op's reference
on each epoch they claim."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from spawnml import opset_history
from spawnml.op import BackendKernel
from spawnml.registry import backend_kernels, get_backend, op_definitions
from spawnml_conformance.cases import generate
from spawnml_conformance.checks import DISAGREES, FAIL, PASS, SKIP, run_case
from spawnml_conformance.opset_cases import adapt, epochs_covered

# Named in the issue: each must be found changing by the schema history (a sanity check
# of the derivation, which lists many more).
NAMED = ["Softmax", "LogSoftmax", "Hardmax", "ReduceSum", "ReduceMean", "ReduceMax", "Split",
         "Squeeze", "Unsqueeze", "Pad", "Resize", "Clip", "Upsample", "Dropout",
         "BatchNormalization", "Gemm", "Concat", "MaxPool", "AveragePool"]  # fmt: skip


@functools.cache
def _cases(op_type: str, since: int) -> list:
    (op,) = [o for o in op_definitions()[("", op_type)] if o.since_version == since]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return generate(op)


def _changing_ops() -> list:
    """(op_type, OpDef) for every registered ai.onnx op with two or more epochs it supports."""
    found = []
    for (domain, op_type), versions in sorted(op_definitions().items()):
        if domain not in ("", "ai.onnx"):
            continue
        for op in versions:
            if len(epochs_covered(op, [])) > 1:
                found.append((op_type, op))
    return found


def test_the_schema_history_finds_the_ops_whose_semantics_change():
    changing = opset_history.changing_ops()
    assert set(NAMED) <= set(changing), sorted(set(NAMED) - set(changing))
    assert opset_history.epochs("", "Softmax") == ((1, 13), (13, None))
    assert opset_history.epochs("", "ReduceSum") == ((1, 13), (13, None))
    assert opset_history.epoch_of("", "Clip", 10) == (6, 11)
    assert opset_history.epochs("", "Relu")[-1] == (6, None)  # 14 only adds bfloat16


# Ops whose epochs conformance cases (tensors in, tensors out, no graph attributes) cannot
# hold, and the tests that cover each epoch instead.
NOT_EXPRESSIBLE = {
    "Scan": "a graph attribute: the official node tests test_scan_sum (opset 8) and "
            "test_scan9_* (9) run in CI on every backend (tests/graph/test_onnx_node_tests.py)",
    "OptionalHasElement": "optional-typed inputs at opsets 15-17: "
                          "tests/graph/test_sequences.py::test_optional_values_in_and_out[16]",
}


def test_every_op_whose_semantics_change_has_cases_in_every_epoch():
    ops = _changing_ops()
    assert len(ops) >= 40, len(ops)
    missing = []
    for op_type, op in ops:
        if op_type in NOT_EXPRESSIBLE:
            continue
        for epoch, n in epochs_covered(op, _cases(op_type, op.since_version)).items():
            if n == 0:
                missing.append(f"{op_type} (OpDef {op.since_version}+) epoch {epoch}")
    assert not missing, missing


def test_an_adapted_case_moves_inputs_to_the_older_attributes():
    seed = next(c for c in _cases("ReduceSum", 1) if c.origin != "opset" and
                c.node.opset >= 13 and len(c.inputs) > 1 and c.inputs[1] is not None)
    old = adapt(seed, 1)
    assert old is not None and old.node.opset == 1
    assert old.node.attrs["axes"] == [int(a) for a in np.asarray(seed.inputs[1]).reshape(-1)]
    assert len(old.inputs) == 1


def _kernel_ops() -> list[str]:
    return sorted({op_type for (_, op_type) in op_definitions()
                   if backend_kernels("cpu", "", op_type)})  # fmt: skip


@pytest.mark.parametrize("op_type", _kernel_ops())
def test_cpu_kernels_match_the_reference_on_every_epoch(op_type):
    """Each cpu fast kernel on its op's cases of every epoch (the seeds and the per-epoch
    cases): passes, or the case is outside the kernel's declared domain (not run)."""
    backend = get_backend("cpu")
    failures = []
    for op in op_definitions()[("", op_type)]:
        for case in _cases(op_type, op.since_version):
            if case.variant:
                continue
            for outcome in run_case(backend, case):
                if outcome.status == FAIL and outcome.case.endswith("]"):  # a kernel's
                    failures.append((outcome.case, outcome.detail[:120]))
    assert not failures, failures


class _SoftmaxAllOpsets(BackendKernel):
    """Claims every Softmax opset but implements only 13's meaning (axis default -1, no
    2-D coercion): the per-epoch cases must catch it."""

    backend, op_type, since_version = "cpu", "Softmax", 1

    def prepare(self, backend, node, inputs, outputs, values):
        axis = int(node.attrs.get("axis", -1))

        def run(ins, outs):
            x = ins[0].numpy()
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            y = (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)
            outs[0].buffer.handle[: y.nbytes] = y.view(np.uint8).reshape(-1)

        return run


def test_a_kernel_claiming_an_epoch_it_does_not_implement_fails(monkeypatch):
    from spawnml import registry

    backend_kernels("cpu", "", "Softmax")
    monkeypatch.setitem(registry._kernels, ("cpu", "", "Softmax"), [_SoftmaxAllOpsets()])
    backend = get_backend("cpu")
    failed, passed = set(), set()
    for case in _cases("Softmax", 1):
        if case.variant or case.node.attrs.get("axis") not in (None,):
            continue
        for outcome in run_case(backend, case):
            if "[_SoftmaxAllOpsets]" in outcome.case:
                (failed if outcome.status == FAIL else passed).add(case.node.opset >= 13)
    assert False in failed  # an opset < 13 case with the default axis
    assert True in passed  # while the opset-13 cases pass


def test_an_undeclared_kernel_defaults_to_the_latest_epoch():
    class Undeclared(BackendKernel):
        backend, op_type = "cpu", "Softmax"

    class Declared(BackendKernel):
        backend, op_type, since_version, until_version = "cpu", "Softmax", 1, 13

    assert Undeclared.opset_range() == (13, None)
    from spawnml.op import Node

    old, new = Node("Softmax", ["x"], ["y"], opset=11), Node("Softmax", ["x"], ["y"], opset=13)
    assert "opset 11" in Undeclared().outside_domain(old, [], [])
    assert Undeclared().outside_domain(new, [], []) is None
    assert Declared().outside_domain(old, [], []) is None
    assert "opset 13" in Declared().outside_domain(new, [], [])


def _case(op_type: str, name: str):
    from spawnml.registry import find_op

    op = find_op("", op_type, 21)
    (case,) = [c for c in generate(op) if c.name == name]
    return case


@pytest.mark.parametrize(("op_type", "name", "opset", "why"), [
    ("Softmax", "default_axis@opset1", None, "semantics of opset 13 and later only"),
    ("LogSoftmax", "default_axis@opset1", None, "semantics of opset 13 and later only"),
    ("Hardmax", "default_axis@opset1", None, "semantics of opset 13 and later only"),
    ("Gemm", "matrix_c@opset1", 6, "Gemm-6 adds C without beta"),  # the 1-6 epoch at 6
])  # fmt: skip
def test_onnx_reference_is_not_the_judge_outside_the_epoch_it_implements(op_type, name,
                                                                         opset, why):
    """onnx.reference runs its newest Softmax on an opset-1 node (no flatten at ``axis``)
    and its Gemm-6 drops beta: such disagreements are skips with the reason, not failures
    of spawnml's reference (which the old-epoch semantics prove right below)."""
    from spawnml_conformance.cases import make_case
    from spawnml_conformance.reference_check import check_reference

    case = _case(op_type, name)
    if opset is not None:
        case = make_case(case.op, case.name, case.inputs, case.node.attrs, opset=opset)
    outcome = check_reference(case)
    assert outcome.status == SKIP and why in outcome.detail, outcome
    if op_type == "Softmax":  # spawnml's reference has the opset-1 semantics
        x = case.inputs[0]
        flat = x.reshape(x.shape[0], -1)
        e = np.exp(flat - flat.max(1, keepdims=True))
        want = (e / e.sum(1, keepdims=True)).reshape(x.shape)
        np.testing.assert_allclose(case.op.reference(case.node, case.inputs)[0], want, rtol=1e-6)


def test_a_wrong_reference_in_the_implemented_epoch_still_fails(monkeypatch):
    """The epoch rule explains disagreements only outside what onnx.reference implements."""
    from spawnml_conformance.reference_check import check_reference

    case = _case("Softmax", "default_axis")
    assert check_reference(case).status == PASS
    monkeypatch.setattr(type(case.op), "reference", lambda self, node, ins: [ins[0] * 0 + 0.5])
    outcome = check_reference(case)
    assert outcome.status == DISAGREES and "disagrees" in outcome.detail
