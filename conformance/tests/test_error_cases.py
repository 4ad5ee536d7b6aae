"""Cases an op declares with ``raises`` (invalid inputs, such as out-of-range indices): the
reference and the backend must both refuse them with that error; computing anything, or
raising another error, fails the case. They get no dtype, edge or opset variants."""

from __future__ import annotations

import numpy as np
import pytest
from conf_sample_ops import SampleRelu

from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.registry import find_op, get_backend
from spawnml_conformance.cases import generate, make_case
from spawnml_conformance.checks import FAIL, PASS, run_case
from spawnml_conformance.reference_check import check_reference


def _case(op, inputs, attrs, raises):
    case = make_case(op, "invalid", inputs, attrs, strict=True)
    case.raises = raises
    return case


def test_an_index_past_the_end_passes_when_refused():
    gather = find_op("", "Gather", 13)
    case = _case(gather, [np.zeros((2, 3), np.float32), np.array([3])], {"axis": 1},
                 InvalidInputError)
    (outcome,) = run_case(get_backend("cpu"), case)
    assert outcome.status == PASS, outcome.detail


def test_computing_outputs_from_invalid_inputs_fails():
    case = _case(SampleRelu(), [np.ones(3, np.float32)], {}, InvalidInputError)
    (outcome,) = run_case(get_backend("cpu"), case)
    assert outcome.status == FAIL and "computed outputs from invalid inputs" in outcome.detail


def test_another_error_fails():
    gather = find_op("", "Gather", 13)
    case = _case(gather, [np.zeros((2, 3), np.float32), np.array([3])], {"axis": 1},
                 InvalidModelError)
    (outcome,) = run_case(get_backend("cpu"), case)
    assert outcome.status == FAIL and "raised InvalidInputError" in outcome.detail


@pytest.mark.parametrize("op_type", ["Gather", "GatherElements", "GatherND", "ScatterND",
                                     "ScatterElements"])
def test_index_ops_declare_error_cases_without_variants(op_type):
    cases = generate(find_op("", op_type, 18), onnx_seeds=False)
    invalid = [c for c in cases if c.raises]
    assert invalid and all(c.raises is InvalidInputError for c in invalid)
    seeds = {c.name for c in invalid}
    assert not [c for c in cases if c.seed in seeds and c.name not in seeds]  # no variants
    assert all(check_reference(c).status == "skipped" for c in invalid)
