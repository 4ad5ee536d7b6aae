"""Acceptance 2: a backend whose Add is off by 1e-3 is reported failing, with the op, the
case and the max error (and the exit status says so)."""

from __future__ import annotations

import json

import pytest
from conf_backends import WrongAddBackend, plugin_backends
from conf_sample_ops import SampleAdd, SampleRelu

from spawnml_conformance import runner


@pytest.fixture
def sample_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner sees the test-local ops instead of spawnml-ops (which evolves apart)."""
    ops = {("", "Add"): [SampleAdd()], ("", "Relu"): [SampleRelu()]}
    monkeypatch.setattr(runner, "op_definitions", lambda: ops)


def test_the_suite_catches_an_add_off_by_1e_3(sample_registry, tmp_path, capsys) -> None:
    out_json, out_md = tmp_path / "m.json", tmp_path / "m.md"
    with plugin_backends(WrongAddBackend):
        status = runner.main(["--backend", "cpu,wrong-add", "--max-cases", "20", "--quiet",
                              "--no-kernels", "--json", str(out_json), "--markdown", str(out_md)])
    assert status == 1
    ops = json.loads(out_json.read_text())["sections"]["operators"]
    wrong = ops["Add"]["wrong-add"]
    assert wrong["status"] == "fail"
    failure = wrong["first_failure"]
    assert failure["case"]  # names the case, e.g. "shapes_2x3x4_2x3x4"
    assert failure["max_error"] == pytest.approx(1e-3, rel=0.05)
    assert ops["Add"]["cpu"]["status"] == "pass"  # the same cases pass on the real cpu
    assert ops["Relu"]["wrong-add"]["status"] == "pass"  # and only Add is blamed
    text = capsys.readouterr().out
    assert "FAIL operators / Add on wrong-add" in text and failure["case"] in text
    md = out_md.read_text()
    assert "## Failures" in md and "| operators | Add | wrong-add |" in md


def test_a_correct_run_exits_zero(sample_registry, tmp_path) -> None:
    status = runner.main(["--backend", "cpu", "--max-cases", "10", "--quiet", "--no-kernels",
                          "--json", str(tmp_path / "m.json")])
    assert status == 0
