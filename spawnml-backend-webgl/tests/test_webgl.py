"""The webgl plugin, its EGL context and probe."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from spawnml.backend import DeviceKind
from spawnml.dtypes import DType
from spawnml.plugins import PluginManager
from spawnml_backend_webgl import WebGLBackend
from spawnml_backend_webgl.probe import probe

FULLSCREEN = """#version 300 es
in vec2 position;
void main() { gl_Position = vec4(position, 0.0, 1.0); }
"""
TIMES_TWO_PLUS_ONE = """#version 300 es
precision highp float;
uniform highp sampler2D x;
out float y;
void main() { y = texelFetch(x, ivec2(gl_FragCoord.xy), 0).r * 2.0 + 1.0; }
"""
# Valid desktop GL 3.3: a desktop context compiles it, an ES context (like a browser) must not.
DESKTOP_VERTEX = "#version 330\nin vec2 p;\nvoid main() { gl_Position = vec4(p, 0, 1); }\n"
DESKTOP_FRAGMENT = "#version 330\nout vec4 c;\nvoid main() { c = vec4(1); }\n"


@pytest.fixture
def reprobe():
    probe.cache_clear()
    yield probe
    probe.cache_clear()


@pytest.fixture
def gles():
    """A moderngl context on a fresh EGL OpenGL ES 3.0 context (skips where there is none)."""
    info = WebGLBackend.probe()
    if not info.available:
        pytest.skip(info.reason)
    import moderngl

    from spawnml_backend_webgl.egl import EGLContext

    egl = EGLContext(3, 0)
    with egl:
        ctx = moderngl.create_context(require=300, context=egl)
        yield ctx
        ctx.release()
    egl.release()
    egl.release()  # idempotent


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"webgl"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [WebGLBackend]


def test_probe_is_consistent_and_cached() -> None:
    info = WebGLBackend.probe()
    assert WebGLBackend.probe() is info
    if info.available:
        assert "(OpenGL ES 3." in info.device
        software = any(s in info.device for s in ("llvmpipe", "softpipe", "SwiftShader"))
        assert (info.device_kind is DeviceKind.EMULATED) == software
    else:
        assert info.reason and info.device_kind is DeviceKind.NONE


def test_the_context_is_opengl_es_and_rejects_desktop_glsl(gles) -> None:
    assert gles.info["GL_VERSION"].startswith("OpenGL ES 3.")
    import moderngl

    # Mesa reports it at compile or link time depending on the shader stage
    with pytest.raises(moderngl.Error, match="GLSL"):
        gles.program(vertex_shader=DESKTOP_VERTEX, fragment_shader=DESKTOP_FRAGMENT)


def test_the_context_runs_a_glsl_es_300_program(gles) -> None:
    """One fragment per output element, inputs read with texelFetch (the WebGL2 GPGPU style)."""
    n = 1000
    x = np.arange(n, dtype="f4")
    source = gles.texture((n, 1), 1, x.tobytes(), dtype="f4")
    target = gles.framebuffer(color_attachments=[gles.texture((n, 1), 1, dtype="f4")])
    program = gles.program(vertex_shader=FULLSCREEN, fragment_shader=TIMES_TWO_PLUS_ONE)
    triangle = gles.buffer(np.array([-1, -1, 3, -1, -1, 3], dtype="f4").tobytes())
    target.use()
    source.use(0)
    gles.vertex_array(program, [(triangle, "2f", "position")]).render(vertices=3)
    out = np.frombuffer(target.read(components=1, dtype="f4"), "f4")
    np.testing.assert_array_equal(out, x * 2.0 + 1.0)


def test_without_moderngl(reprobe, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "moderngl", None)
    assert reprobe().reason == "moderngl is not installed"


def test_without_an_egl_driver() -> None:
    """With no EGL vendor library there is no surfaceless platform, and the reason says so."""
    code = "from spawnml_backend_webgl.probe import probe; print(probe().reason)"
    env = {**os.environ, "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl.json"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "EGL" in done.stdout and "libegl-mesa0" in done.stdout


def test_the_runtime_is_real(backend) -> None:
    """A constructed backend runs on an ES context, with WebGL2's limits and types declared."""
    assert backend.ctx.info["GL_VERSION"].startswith("OpenGL ES 3.")
    caps = backend.capabilities
    assert caps.extras["max_texture_units"] <= 16 and caps.extras["texture_format"] == "R32UI"
    assert not caps.float16_arithmetic and DType.int64 not in caps.dtypes
    assert backend.storage_dtype(DType.float16) is DType.float32
    assert backend.storage_dtype(DType.int64) is DType.int32
    assert backend.storage_dtype(DType.bool) is DType.uint32
