"""--baseline: known failures stay reported, only new ones fail the run."""

from __future__ import annotations

import json

from spawnml_conformance.checks import FAIL, PASS, Outcome
from spawnml_conformance.report import Report


def _report(status_add: str, status_relu: str) -> Report:
    r = Report(columns=[])
    r.add(
        "operators",
        "Add",
        "cpu",
        Outcome(status_add, "broadcast", 1e-3 if status_add == FAIL else 0.0),
    )
    r.add("operators", "Relu", "cpu", Outcome(status_relu, "basic", 0.0))
    return r


def test_known_failure_is_not_a_regression_but_a_new_one_is():
    baseline = json.loads(_report(FAIL, PASS).to_json())
    assert _report(FAIL, PASS).failed  # still reported as failing
    assert _report(FAIL, PASS).regressions(baseline) == []
    regressions = _report(FAIL, FAIL).regressions(baseline)
    assert regressions == ["operators / Relu on cpu (was pass)"]
