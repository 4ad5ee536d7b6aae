"""Transform feedback vs. rendering into a texture: which output path is faster?

WebGL2 offers two ways to write one value per output element. This script runs the same
gather kernel both ways on the backend's OpenGL ES 3.0 context and prints the median time
per launch (including, for transform feedback, the copy from the feedback buffer into the
output texture that the next kernel reads with texelFetch). Run:

    python spawnml-backend-webgl/benchmarks/output_path.py
"""

from __future__ import annotations

import statistics
import time

import moderngl
import numpy as np

from spawnml_backend_webgl.egl import EGLContext
from spawnml_backend_webgl.readback import PixelReader

WIDTH = 4096
BODY = {
    "light": "float v = a * 1.5 + b;",
    "heavy": "float v = a; for (int k = 0; k < 64; k++) { v = v * 0.999 + sin(b + float(k)); }",
}
READ = """
precision highp float; precision highp int; precision highp usampler2D;
uniform highp usampler2D in_a; uniform highp usampler2D in_b;
float fetch(highp usampler2D t, int i) {
    return uintBitsToFloat(texelFetch(t, ivec2(i % %W%, i / %W%), 0).x);
}
"""
VERTEX_TF = "#version 300 es\n" + READ + """
flat out uint result;
void main() {
    int gid = gl_VertexID;
    float a = fetch(in_a, gid); float b = fetch(in_b, gid);
    %BODY%
    result = floatBitsToUint(v);
}
"""
FRAGMENT_NOP = """#version 300 es
precision highp float;
out vec4 c;
void main() { c = vec4(0.0); }
"""
VERTEX_QUAD = """#version 300 es
void main() {
    vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
    gl_Position = vec4(p, 0.0, 1.0);
}
"""
FRAGMENT_OUT = "#version 300 es\n" + READ + """
out uint result;
void main() {
    int gid = int(gl_FragCoord.y) * %W% + int(gl_FragCoord.x);
    if (gid >= %N%) { discard; }
    float a = fetch(in_a, gid); float b = fetch(in_b, gid);
    %BODY%
    result = floatBitsToUint(v);
}
"""


def _src(text: str, n: int, body: str) -> str:
    return text.replace("%W%", str(WIDTH)).replace("%N%", str(n)).replace("%BODY%", body)


def _texture(ctx: moderngl.Context, rows: int, data: np.ndarray | None = None) -> moderngl.Texture:
    tex = ctx.texture((WIDTH, rows), 1, dtype="u4")
    tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
    if data is not None:
        padded = np.zeros(WIDTH * rows, np.float32)
        padded[: data.size] = data
        tex.write(padded.view(np.uint32).tobytes())
    return tex


def _time_ms(run, ctx: moderngl.Context) -> float:
    t0 = time.perf_counter()
    run()
    ctx.finish()
    return (time.perf_counter() - t0) * 1e3


def measure(
    ctx: moderngl.Context, reader: PixelReader, n: int, body: str, repeats: int = 7
) -> dict[str, float]:
    """Median ms per launch of each path; the two alternate so machine load hits both."""
    rows = -(-n // WIDTH)
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    ta, tb = _texture(ctx, rows, a), _texture(ctx, rows, b)
    out = _texture(ctx, rows)
    fbo = ctx.framebuffer(color_attachments=[out])
    no_target = ctx.simple_framebuffer((1, 1))  # without one, feedback writes zeros

    # Transform feedback: one vertex per element into a buffer, then buffer -> texture.
    tf = ctx.program(vertex_shader=_src(VERTEX_TF, n, body), fragment_shader=FRAGMENT_NOP,
                     varyings=["result"])
    tf["in_a"], tf["in_b"] = 0, 1
    feedback = ctx.buffer(reserve=WIDTH * rows * 4)
    tf_vao = ctx.vertex_array(tf, [])

    def run_tf() -> None:
        ta.use(0)
        tb.use(1)
        no_target.use()
        tf_vao.transform(feedback, mode=moderngl.POINTS, vertices=n)
        out.write(feedback)

    # Fragment: one fragment per element rendered into the output texture.
    frag = ctx.program(vertex_shader=VERTEX_QUAD, fragment_shader=_src(FRAGMENT_OUT, n, body))
    frag["in_a"], frag["in_b"] = 0, 1
    frag_vao = ctx.vertex_array(frag, [])

    def run_fragment() -> None:
        ta.use(0)
        tb.use(1)
        fbo.use()
        fbo.viewport = (0, 0, WIDTH, rows)
        frag_vao.render(mode=moderngl.TRIANGLES, vertices=3)

    results = []
    for run in (run_tf, run_fragment):  # both paths compute the same bits
        out.write(np.zeros(WIDTH * rows, np.uint32).tobytes())
        run()
        fbo.use()
        results.append(reader.read(WIDTH, rows)[:n])
    np.testing.assert_array_equal(results[0], results[1])
    if body == BODY["light"]:
        np.testing.assert_array_equal(results[1].view(np.float32), a * np.float32(1.5) + b)
    tf_times, frag_times = [], []
    for _ in range(repeats):
        tf_times.append(_time_ms(run_tf, ctx))
        frag_times.append(_time_ms(run_fragment, ctx))
    for obj in (ta, tb, out, feedback, tf_vao, tf, frag_vao, frag, fbo, no_target):
        obj.release()
    return {
        "transform_feedback_ms": statistics.median(tf_times),
        "fragment_ms": statistics.median(frag_times),
    }


def main() -> None:
    egl = EGLContext(3, 0)
    with egl:
        ctx = moderngl.create_context(require=300, context=egl)
        print(ctx.info["GL_RENDERER"], "|", ctx.info["GL_VERSION"])
        reader = PixelReader(egl.load_opengl_function)
        print(f"{'kernel':>6} {'elements':>10} {'transform feedback':>20} {'fragment':>10}")
        for name, body in BODY.items():
            for n in (1 << 16, 1 << 20, 1 << 22):
                r = measure(ctx, reader, n, body)
                print(f"{name:>6} {n:>10} {r['transform_feedback_ms']:>17.2f} ms"
                      f" {r['fragment_ms']:>7.2f} ms")
        ctx.release()
    egl.release()


if __name__ == "__main__":
    main()
