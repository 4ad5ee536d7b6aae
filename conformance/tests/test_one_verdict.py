"""One verdict (issue #28): the CLI (``spawnml-conformance``) and the pytest kit
(``BackendConformance``) judge every case with ``checks.verdict`` and agree case by case.

A throw-away plugin distribution (a module and its dist-info on ``sys.path``, found by its
``spawnml`` entry point like any installed plugin) registers two ops, ``Twice`` (right)
and ``Broken`` (its portable kernel adds 0.5: an op bug, failing on cpu too), and two
backends: ``twin`` (cpu under another name) and ``offby`` (every float32 output off by
1e-3: a backend bug). A second entry point, ``brokenimport``, raises at import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from spawnml import registry
from spawnml.plugins import reset_plugin_manager
from spawnml_conformance import checks, runner
from spawnml_conformance.runner import Config, Runner

PLUGIN = '''
import numpy as np

from spawnml import hookimpl
from spawnml.backend import BackendInfo, DeviceKind
from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, kernel
from spawnml.op import In, Lowering, OpDef, Out
from spawnml_backend_cpu.backend import CPUBackend


@kernel
def _twice(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0


@kernel
def _wrong(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0 + 0.5  # the planted op bug


class _Doubling(OpDef):
    domain = "verdict.test"
    dtypes = (DType.float32,)
    elementwise_inputs = 1

    def infer(self, node, inputs, values):
        return [inputs[0]]

    def reference(self, node, inputs):
        return [(np.asarray(inputs[0]) * 2).astype(np.float32)]

    def lower(self, node, inputs, outputs, values):
        low = Lowering()
        low.launch(self.KERNEL, [In(0)], Out(0))
        return low


Twice = type("Twice", (_Doubling,), {"op_type": "Twice", "KERNEL": _twice})
Broken = type("Broken", (_Doubling,), {"op_type": "Broken", "KERNEL": _wrong})


class Twin(CPUBackend):
    name = "twin"

    @classmethod
    def probe(cls):
        return BackendInfo(cls.name, True, device="cpu again", device_kind=DeviceKind.EMULATED)


class OffBy(Twin):
    name = "offby"

    def compile(self, kernel):
        return super().compile(kernel), kernel

    def launch(self, program, output, inputs):
        compiled, kernel = program
        super().launch(compiled, output, inputs)
        if kernel.output.dtype is DType.float32 and kernel.output.size:
            output.handle[: kernel.output.size * 4].view(np.float32)[:] += np.float32(1e-3)


@hookimpl
def spawnml_register_ops(register):
    register(Twice)
    register(Broken)


@hookimpl
def spawnml_register_backends(register):
    register(Twin)
    register(OffBy)
'''

KIT = '''
from spawnml_conformance.kit import BackendConformance

class _Base(BackendConformance):
    ops = ["Twice", "Broken"]
    max_cases_per_op = {max_cases}

class TestCpu(_Base):
    backend_name = "cpu"

class TestTwin(_Base):
    backend_name = "twin"

class TestOffby(_Base):
    backend_name = "offby"

class TestNope(_Base):
    backend_name = "nope"

class TestBrokenimport(_Base):
    backend_name = "brokenimport"
'''

MAX_CASES = 6
OPS = ["--ops", "Twice,Broken", "--max-cases", str(MAX_CASES), "--quiet", "--no-kernels",
       "--no-reference-check"]
BACKENDS = {"TestCpu": "cpu", "TestTwin": "twin", "TestOffby": "offby", "TestNope": "nope",
            "TestBrokenimport": "brokenimport"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "verdict_plugin.py").write_text(PLUGIN)
    (root / "broken_import_plugin.py").write_text(
        'raise ImportError("libverdict.so.1: cannot open shared object file")\n')
    info = root / "verdict_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: verdict-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[spawnml]\nverdict = verdict_plugin\nbrokenimport = broken_import_plugin\n")
    return root


@pytest.fixture
def plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugins of ``site`` loaded in this process (as an installed distribution)."""
    monkeypatch.syspath_prepend(str(site))
    reset_plugin_manager()
    registry.reset()
    try:
        yield
    finally:
        monkeypatch.undo()
        reset_plugin_manager()
        registry.reset()


@pytest.fixture(scope="module")
def kit_verdicts(site: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str],
                                                                                 str]:
    """(backend, "Op case") -> pass/fail/xfail/skip, from pytest running the kit."""
    work = tmp_path_factory.mktemp("kit")
    (work / "test_kit_verdicts.py").write_text(KIT.format(max_cases=MAX_CASES))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(work),
         "-k", "test_op_case or test_registered", "--junitxml", str(work / "j.xml"),
         str(work / "test_kit_verdicts.py")],
        capture_output=True, text=True, timeout=300, cwd=work, env=env,
    )
    assert (work / "j.xml").exists(), done.stdout[-3000:] + done.stderr[-2000:]
    found = {}
    for case in ET.parse(work / "j.xml").getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        if case.find("failure") is not None or case.find("error") is not None:
            status = checks.FAIL
        elif (skipped := case.find("skipped")) is not None:
            status = checks.XFAIL if skipped.get("type") == "pytest.xfail" else "skip"
        else:
            status = checks.PASS
        key = name.split("[", 1)[1][:-1] if "[" in name else name
        key = key.split("::", 1)[-1]  # "Op case", with or without the op's domain
        found[(BACKENDS[cls], key)] = status
    return found


def _cli_verdicts(backends: list[str]) -> dict[tuple[str, str], str]:
    found = Runner(Config(backends=backends, ops=["Twice", "Broken"], max_cases=MAX_CASES,
                          kernels=False, reference_check=False, progress=False))
    found.run()
    return {(backend, f"{row.split('::')[-1]} {case}"): v.status
            for (row, backend, case), v in found.verdicts.items()}


def test_the_cli_and_the_kit_agree_case_by_case(plugin, kit_verdicts) -> None:
    cli = _cli_verdicts(["cpu", "twin", "offby"])
    kit = {k: v for k, v in kit_verdicts.items() if k[1] != "test_registered_through_an_entry_point"
           and k[0] in ("cpu", "twin", "offby")}
    assert cli and set(cli) == set(kit)
    assert cli == kit
    statuses = {(b, case.split()[0], s) for (b, case), s in cli.items()}
    # the op bug: fail on cpu, xfail ("fails on cpu too") elsewhere; the backend bug: fail
    assert ("cpu", "Broken", checks.FAIL) in statuses
    assert not {s for b, op, s in statuses if op == "Broken" and b != "cpu"} - {
        checks.XFAIL, checks.PASS}  # size-0 cases pass everywhere
    assert ("twin", "Broken", checks.XFAIL) in statuses
    assert ("offby", "Broken", checks.XFAIL) in statuses
    assert ("offby", "Twice", checks.FAIL) in statuses
    assert {s for b, op, s in statuses if op == "Twice" and b != "offby"} == {checks.PASS}


def test_without_cpu_in_the_run_the_case_still_runs_on_cpu(plugin) -> None:
    """The kit xfails an op bug on twin (it runs the case on cpu); so does the CLI when cpu
    is not among its backends."""
    cli = _cli_verdicts(["twin"])
    assert {s for (_, case), s in cli.items() if case.startswith("Broken")} >= {checks.XFAIL}
    assert checks.FAIL not in cli.values()


@pytest.mark.parametrize(("backends", "ops", "status"), [
    ("cpu", "Twice", 0),  # nothing fails
    ("twin", "Twice,Broken", 0),  # the op bug is xfail off cpu: reported, exit 0
    ("cpu,twin", "Twice,Broken", 1),  # ...and fails on cpu itself
    ("cpu", "Broken", 1),
    ("offby", "Twice,Broken", 1),  # the backend bug fails (cpu passes those cases)
    ("offby", "Broken", 0),  # where it coincides with the op bug, it is xfail
    ("nope", "Twice", 2),  # not registered
    ("brokenimport", "Twice", 2),  # its plugin raised at import
])
def test_the_exit_status(plugin, capsys, backends, ops, status) -> None:
    argv = ["--backend", backends, *OPS]
    argv[argv.index("--ops") + 1] = ops
    assert runner.main(argv) == status
    out, err = capsys.readouterr()
    if status == 2:
        assert f"backend '{backends}' is not registered" in err
        if backends == "brokenimport":
            assert "plugin 'brokenimport' failed to load: ImportError: libverdict.so.1" in err
    elif status == 0 and "Broken" in ops:
        assert "result: passed (1 xfail cell(s)" in out and "XFAIL operators / " in out
    else:
        assert out.strip().splitlines()[-1].startswith(
            "result: passed" if status == 0 else "result: FAILED")


def test_the_kit_refuses_what_the_cli_refuses(kit_verdicts) -> None:
    """An unregistered backend and one whose plugin raised at import: exit 2 in the CLI
    (above), a failing registration test (and the op cases skipped) in the kit."""
    for name in ("nope", "brokenimport"):
        assert kit_verdicts[(name, "test_registered_through_an_entry_point")] == checks.FAIL
        cases = {s for (b, k), s in kit_verdicts.items() if b == name and k != (
            "test_registered_through_an_entry_point")}
        assert cases == {"skip"}
    for name in ("cpu", "twin", "offby"):
        assert kit_verdicts[(name, "test_registered_through_an_entry_point")] == checks.PASS
