"""The WGSL the webgpu backend generates compiles with the browser's own compiler (Chrome's
Tint), not only with wgpu's naga: every kernel of the kernel suite and of one conformance
case per operator, rendered as export-web renders it (``WebGPUBackend(portable=True)``).

Tint follows the WGSL specification where naga is lenient (a NaN or Inf constant
expression, comparisons as operands of comparisons without parentheses): a renderer change
that only naga accepts fails here, for the whole class of kernels, not one model.
"""

from __future__ import annotations

import pytest

from spawnml.testing.kernel_suite import CASES, unsupported_reason
from spawnml_web.browser import Browser, serve, unavailable_reason

REASON = unavailable_reason()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REASON is not None, reason=f"no browser: {REASON}")]


def _sources() -> dict[str, str]:
    from spawnml_backend_webgpu.backend import WebGPUBackend

    backend = WebGPUBackend(portable=True)
    sources = {}
    for case in CASES:
        if unsupported_reason(backend, case):
            continue
        spec = case.kernel.specialize(case.inputs, (case.out_shape, case.out_dtype),
                                      **case.consts)
        try:
            program = backend.compile(spec)
        except Exception as exc:  # noqa: BLE001 - the kernel suite reports those on webgpu
            pytest.fail(f"{case.name} does not compile for webgpu: {exc}")
        sources[case.name] = program.source
    return sources


def _operator_sources() -> dict[str, str]:
    """The programs one conformance case of every operator compiles on webgpu."""
    from spawnml.registry import op_definitions
    from spawnml_backend_webgpu.backend import WebGPUBackend
    from spawnml_conformance.cases import generate, sample
    from spawnml_conformance.checks import run_case

    backend = WebGPUBackend(portable=True)
    backend.max_cached_programs = 1 << 20  # keep every program: their sources are the test
    for defs in op_definitions().values():
        for case in sample(generate(defs[-1], onnx_seeds=False), 1):
            run_case(backend, case)  # outcomes are conformance's business, not this test's
    programs = backend.__dict__.get("_programs", {})
    return {key: p.source for key, p in programs.items()}


def test_every_kernel_suite_and_operator_shader_compiles_in_chromium(tmp_path):
    sources = {**_sources(), **_operator_sources()}
    assert len(sources) > 300
    (tmp_path / "index.html").write_text("<title>wgsl</title>")
    with serve(tmp_path) as url, Browser() as browser:
        verdicts = browser.compile_wgsl(url, sources)
    refused = {name: errors for name, errors in verdicts.items() if errors}
    assert not refused, refused


def test_a_shader_tint_refuses_is_reported(tmp_path):
    """The check itself can fail: the constant-expression NaN naga accepted."""
    bad = ("@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
           "@compute @workgroup_size(1) fn main() { out[0] = bitcast<f32>(0x7fc00000u); }")
    (tmp_path / "index.html").write_text("<title>wgsl</title>")
    with serve(tmp_path) as url, Browser() as browser:
        verdicts = browser.compile_wgsl(url, {"bad": bad})
    assert verdicts["bad"] and "cannot be represented" in verdicts["bad"][0]
