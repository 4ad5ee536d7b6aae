"""Exclusions come from declared capabilities and are listed with the reason; compile-only
checking hands every specialised kernel to the backend's compile_check."""

from __future__ import annotations

import importlib.util

import pytest
from conf_backends import NarrowBackend, plugin_backends
from conf_sample_ops import SampleAdd, SampleRelu

from spawnml.errors import KernelCompileError
from spawnml.kernel import ir
from spawnml_conformance import compile_only
from spawnml_conformance.runner import Config, Runner


def test_capability_exclusions_are_listed_with_their_reason() -> None:
    with plugin_backends(NarrowBackend):
        report = Runner(Config(backends=["narrow"], op_defs=[SampleAdd(), SampleRelu()],
                               kernels=False, reference_check=False, progress=False)).run()
    assert not report.failed, report.to_text()
    reasons = {reason for _, row, _, reason, _ in report.exclusions() if row == "Add"}
    assert any("float16 is not among narrow's dtypes" in r for r in reasons), reasons
    assert any("int64 is not among narrow's dtypes" in r for r in reasons), reasons
    assert "Exclusions" in report.to_markdown()


def test_compile_only_reports_a_kernel_that_does_not_compile() -> None:
    def check(kernel: ir.KernelIR) -> None:
        if any(isinstance(e, ir.Call) and e.fn == "max" for e in ir.all_exprs(kernel.body)):
            raise KernelCompileError(f"{kernel.name}: max() is not supported (test compiler)")

    target = compile_only.CompileCheckBackend("fake", check, compile_only.ALL_DTYPES)
    runner = Runner(Config(op_defs=[SampleAdd(), SampleRelu()], max_cases=10, progress=False))
    relu = [compile_only.check_op_case(target, c) for c in runner.cases("Relu", SampleRelu())]
    add = [compile_only.check_op_case(target, c) for c in runner.cases("Add", SampleAdd())]
    assert {o.status for o in add} == {"pass"} and target.checked
    failed = [o for o in relu if o.status == "fail"]
    assert failed and "max() is not supported" in failed[0].detail


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC is not installed")
def test_cuda_compile_only_through_the_runner() -> None:
    found = compile_only.find_compile_check("cuda")
    assert found is not None
    report = Runner(Config(backends=["cuda"], compile_only={"cuda"}, op_defs=[SampleAdd()],
                           max_cases=8, reference_check=False, progress=False)).run()
    assert report.columns[0].mode == "compile-only"
    assert report.sections["operators"]["Add"]["cuda"].status == "pass", report.to_text()
    assert report.sections["kernel suite"]["kernels"]["cuda"].counts["pass"] >= 100
