"""Generated shaders are valid WebGL2: they compile and link in headless Chromium."""

from __future__ import annotations

import pytest

from spawnml.testing.kernel_suite import CASES
from spawnml_backend_webgl.browser_check import chromium_path, compile_in_chromium
from spawnml_backend_webgl.packing import copy_shader
from spawnml_backend_webgl.renderer import VERTEX_SHADER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed"),
]

DESKTOP_ONLY = "#version 330\nout vec4 c;\nvoid main() { c = vec4(1.0); }\n"


def test_generated_shaders_compile_and_link_in_chromium_webgl2(backend) -> None:
    """Every kernel-suite shader (plus the packing copy shader) and one desktop-GLSL shader
    that a browser must reject, so a page that compiles nothing cannot pass."""
    shaders = []
    for case in CASES:
        spec = case.kernel.specialize(case.inputs, (case.out_shape, case.out_dtype), **case.consts)
        shaders.append((case.name, VERTEX_SHADER, backend.compile(spec).source))
    shaders.append(("pack_copy", VERTEX_SHADER, copy_shader(backend.layout)))
    shaders.append(("desktop_only", VERTEX_SHADER, DESKTOP_ONLY))

    report = compile_in_chromium(shaders)
    assert report["webgl2"], "headless chromium offered no WebGL2 context"
    verdicts = {r["name"]: r for r in report["results"]}
    assert not verdicts.pop("desktop_only")["compiled"]
    failed = {n: r["log"] for n, r in verdicts.items() if not (r["compiled"] and r["linked"])}
    assert not failed, f"rejected by {report['renderer']}: {failed}"
    assert len(verdicts) == len(CASES) + 1
