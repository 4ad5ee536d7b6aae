"""The runner's command line: ``spawnml conformance`` and ``spawnml-conformance`` take the same
options, unknown backends are a usage error, the result line says what decided it, and the
log records of the cases go to --log instead of the terminal."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import warnings
from typing import Any

import pytest
from conf_backends import WrongAddBackend, plugin_backends
from conf_sample_ops import SampleAdd, SampleRelu

from spawnml import cli
from spawnml.plugins import PluginRecord, get_plugin_manager
from spawnml_backend_cpu.backend import CPUBackend
from spawnml_conformance import onnx_tests, runner
from spawnml_conformance.checks import FAIL, PASS, Outcome
from spawnml_conformance.report import Report

FAST = ["--quiet", "--no-kernels", "--no-reference-check"]


@pytest.fixture
def sample_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner sees the test-local ops instead of spawnml-ops (which evolves apart)."""
    ops = {("", "Add"): [SampleAdd()], ("", "Relu"): [SampleRelu()]}
    monkeypatch.setattr(runner, "op_definitions", lambda: ops)


def _exit(main: Any, argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(argv)
    return int(info.value.code or 0)


def _options(help_text: str) -> str:
    return help_text[help_text.index("options:"):]


# -- the two entry points --------------------------------------------------------------------
def test_both_entry_points_print_the_same_options(capsys) -> None:
    assert _exit(runner.main, ["--help"]) == 0
    standalone = capsys.readouterr().out
    assert _exit(cli.main, ["conformance", "--help"]) == 0
    sub = capsys.readouterr().out
    assert sub.startswith("usage: spawnml conformance ")
    assert _options(sub) == _options(standalone)
    for option in ("--backend", "--ops", "--onnx-node-tests", "--compile-only", "--max-cases",
                   "--json", "--markdown", "--baseline", "--log", "--summary", "--quiet"):
        assert option in _options(sub), option


def test_spawnml_conformance_runs_through_the_spawnml_cli(sample_registry, tmp_path,
                                                          capsys) -> None:
    matrix = tmp_path / "m.json"
    status = cli.main(["conformance", "--backend", "cpu", "--max-cases", "1", "--ops", "Relu",
                       "--json", str(matrix), "--log", str(tmp_path / "c.log"), *FAST])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.rstrip().endswith("result: passed")
    peak = re.search(r"^peak memory: (\d+) MiB resident", out, re.MULTILINE)
    assert peak and int(peak.group(1)) > 0, out  # this (pytest) process's ru_maxrss
    cells = json.loads(matrix.read_text())["sections"]["operators"]
    assert set(cells) == {"Relu"} and cells["Relu"]["cpu"]["status"] == PASS


@pytest.mark.parametrize("main, argv", [
    (runner.main, []), (cli.main, ["conformance"]),
])  # fmt: skip
def test_a_bad_option_is_an_argparse_error(main, argv, capsys) -> None:
    assert _exit(main, [*argv, "--bogus"]) == 2
    assert "error: unrecognized arguments: --bogus" in capsys.readouterr().err
    assert _exit(main, [*argv, "--max-cases", "many"]) == 2
    assert "--max-cases: invalid int value: 'many'" in capsys.readouterr().err


@pytest.mark.parametrize("main, argv, prog", [
    (runner.main, [], "spawnml-conformance"), (cli.main, ["conformance"], "spawnml conformance"),
])  # fmt: skip
def test_an_unknown_backend_is_a_usage_error(main, argv, prog, capsys) -> None:
    status = main([*argv, "--backend", "cpu,nope", *FAST])
    out, err = capsys.readouterr()
    assert status == 2
    assert "result:" not in out
    (line,) = err.splitlines()
    assert line.startswith(f"{prog}: error: backend 'nope' is not registered (registered: ")
    assert "cpu" in line.split("registered: ")[1]


def test_an_unknown_backend_names_the_plugins_that_failed_to_load(monkeypatch, capsys) -> None:
    broken = PluginRecord("fancy", "spawnml_backend_fancy.plugin",
                          error="ImportError: libfancy.so.1: cannot open shared object file")
    monkeypatch.setattr(get_plugin_manager(), "failed", lambda: [broken])
    assert runner.main(["--backend", "fancy", *FAST]) == 2
    err = capsys.readouterr().err
    assert "backend 'fancy' is not registered" in err
    assert "plugin 'fancy' failed to load: ImportError: libfancy.so.1" in err


# -- the result line ---------------------------------------------------------------------------
def _report(**cells: str) -> Report:
    """Operators rows on cpu, ``Row=status``."""
    r = Report(columns=[])
    for row, status in cells.items():
        error, detail = (1e-3, "off by 1e-3") if status == FAIL else (0.0, "")
        r.add("operators", row, "cpu", Outcome(status, f"{row}_case", error, detail))
    return r


def test_with_a_baseline_known_failures_are_counted_and_only_regressions_fail() -> None:
    baseline = json.loads(_report(Add=FAIL, Relu=PASS, Sub=FAIL).to_json())
    lines, result = _report(Add=FAIL, Relu=PASS, Sub=PASS).summary(baseline, "base.json", "m.md")
    assert result == ("result: passed against the baseline base.json: 0 regressions, "
                      "1 known failure(s) (listed in m.md), 1 newly passing")
    assert lines == ["NEWLY PASSING operators / Sub on cpu (was fail)"]
    lines, result = _report(Add=FAIL, Relu=FAIL, Sub=FAIL).summary(baseline, "base.json", "m.md")
    assert result == ("result: FAILED against the baseline base.json: 1 regression(s) "
                      "(REGRESSION lines above), 2 known failure(s) (listed in m.md), "
                      "0 newly passing")
    assert lines == ["REGRESSION operators / Relu on cpu (was pass): Relu_case: off by 1e-3"]


def test_without_a_baseline_every_failure_decides() -> None:
    lines, result = _report(Add=FAIL, Relu=PASS).summary()
    assert result == "result: FAILED: 1 failing cell(s) (FAIL lines above)"
    assert lines == ["FAIL operators / Add on cpu: Add_case: off by 1e-3"]
    assert _report(Relu=PASS).summary() == ([], "result: passed")


def test_the_runner_exits_by_the_baseline(sample_registry, tmp_path, capsys) -> None:
    """wrong-add's Add fails: a known failure when the baseline has it failing (exit 0),
    a regression when the baseline has it passing (exit 1)."""
    matrix, md = tmp_path / "now.json", tmp_path / "m.md"
    argv = ["--backend", "cpu,wrong-add", "--max-cases", "4", "--summary", *FAST]
    with plugin_backends(WrongAddBackend):
        assert runner.main([*argv, "--json", str(matrix)]) == 1
        capsys.readouterr()
        assert runner.main([*argv, "--baseline", str(matrix), "--markdown", str(md)]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[-1] == (f"result: passed against the baseline {matrix}: 0 regressions, "
                           f"1 known failure(s) (listed in {md}), 0 newly passing")
        assert "wrong-add" in md.read_text()
        passing = json.loads(matrix.read_text())
        passing["sections"]["operators"]["Add"]["wrong-add"]["status"] = PASS
        (tmp_path / "passing.json").write_text(json.dumps(passing))
        assert runner.main([*argv, "--baseline", str(tmp_path / "passing.json")]) == 1
        out = capsys.readouterr().out.splitlines()
    (regression,) = [x for x in out if x.startswith("REGRESSION ")]
    assert regression.startswith("REGRESSION operators / Add on wrong-add (was pass): ")
    assert out[-1].startswith("result: FAILED against the baseline ")
    assert out[-1].endswith(
        "1 regression(s) (REGRESSION lines above), 0 known failure(s), 0 newly passing")


def test_an_unreadable_baseline_is_a_setup_error(tmp_path, capsys) -> None:
    (tmp_path / "b.json").write_text("[]")
    assert runner.main(["--backend", "cpu", "--baseline", str(tmp_path / "b.json"), *FAST]) == 2
    assert "not a matrix written by --json" in capsys.readouterr().err


# -- diagnostics -------------------------------------------------------------------------------
def test_what_a_case_emits_goes_to_the_log_file_with_the_case(sample_registry, monkeypatch,
                                                              tmp_path, capfd) -> None:
    real = runner.checks.run_case

    def noisy(backend: Any, case: Any) -> list[Outcome]:
        logging.getLogger("spawnml.session").warning("placement: a note about %s", case.name)
        warnings.warn("a warning of the case", RuntimeWarning, stacklevel=1)
        os.write(2, b"1 warning generated.\n")  # as a driver's compiler does, natively
        return real(backend, case)

    monkeypatch.setattr(runner.checks, "run_case", noisy)
    log = tmp_path / "c.log"
    argv = ["--backend", "cpu", "--ops", "Relu", "--max-cases", "2", "--summary",
            "--no-kernels", "--no-reference-check"]
    status = runner.main([*argv, "--log", str(log)])  # with progress lines
    out, err = capfd.readouterr()
    assert status == 0, out
    lines = log.read_text().splitlines()
    assert len(lines) == 6, lines  # 2 cases: a log record, a warning and a stderr line each
    assert lines[0].startswith("cpu / operators / Relu / ")
    assert "WARNING spawnml.session: placement: a note about " in lines[0]
    assert "RuntimeWarning" in lines[1] and "a warning of the case" in lines[1]
    assert lines[2].endswith(": stderr: 1 warning generated.")
    assert "cpu: Relu" in err  # progress still reaches the terminal
    assert "placement" not in err and "warning" not in err
    assert out.splitlines()[-3] == ("diagnostics: 6 log record(s), warning(s) and stderr "
                                    f"line(s) emitted while cases ran, in {log}")
    monkeypatch.setattr(runner.checks, "run_case",
                        lambda b, c: (warnings.warn("w", stacklevel=1), real(b, c))[1])
    runner.main([*argv, "--quiet"])
    assert capfd.readouterr().out.splitlines()[-3] == (
        "diagnostics: 2 log record(s) and warning(s) emitted while cases ran, not shown "
        "(--log FILE keeps them, with stderr)")


def test_placement_notes_stay_off_the_terminal(tmp_path) -> None:
    """The ONNX node tests of Cast run on the host for narrow element types (bfloat16,
    float8, ...): each session logs a placement note, with the reason, into --log only."""
    log = tmp_path / "c.log"
    done = subprocess.run(
        [sys.executable, "-m", "spawnml_conformance.runner", "--backend", "cpu", "--ops", "Cast",
         "--onnx-node-tests", "--max-cases", "1", "--summary", "--log", str(log), *FAST],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "placement:" not in done.stderr and "placement:" not in done.stdout
    notes = [x for x in log.read_text().splitlines() if "placement: " in x]
    assert notes and all(x.startswith("cpu / ONNX node tests / Cast / test_cast") for x in notes)
    assert any("host-only: Cast x1 (element type bfloat16 has no kernel type)" in x for x in notes)
    assert done.stdout.splitlines()[-1] == "result: passed"


# -- the ONNX node tests run on the backend asked for ----------------------------------------
class BrokenBackend(CPUBackend):
    """cpu whose every launch fails."""

    name = "broken"

    def launch(self, program: Any, output: Any, inputs: Any) -> None:
        raise RuntimeError("broken: launch failed")


def test_onnx_node_tests_run_on_the_backend_named() -> None:
    from spawnml.registry import get_backend

    module, _ = onnx_tests.adapter_module()
    assert module is not None
    with plugin_backends(BrokenBackend):
        backend = get_backend("broken")
        test = next(iter(onnx_tests.single_node_tests({"Relu"})))
        assert onnx_tests._prepare(module, test.model, "broken").session.get_providers() == [
            "broken"]
        outcomes = [o for _, o in onnx_tests.run_tests(backend, {"Relu"})]
    assert outcomes and all(o.status == FAIL for o in outcomes), outcomes
    assert "broken: launch failed" in outcomes[0].detail
