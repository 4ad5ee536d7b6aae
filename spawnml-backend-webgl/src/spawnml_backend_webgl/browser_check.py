"""Compile shaders in a real browser's WebGL2 (headless Chromium) and report the verdicts.

A page served from 127.0.0.1 compiles and links each (vertex, fragment) pair with
``gl.getShaderParameter(COMPILE_STATUS)`` / ``gl.getProgramParameter(LINK_STATUS)`` and POSTs
the results back. Chromium runs in its own process group, stopped as a group afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spawnml.errors import BackendError

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
)

_PAGE = """<!doctype html><html><body><script>
const shaders = %s;
const gl = document.createElement('canvas').getContext('webgl2');
const report = {webgl2: !!gl, renderer: gl ? gl.getParameter(gl.VERSION) : null, results: []};
function compile(type, source) {
  const s = gl.createShader(type); gl.shaderSource(s, source); gl.compileShader(s);
  return [s, gl.getShaderParameter(s, gl.COMPILE_STATUS), gl.getShaderInfoLog(s)];
}
if (gl) for (const [name, vs, fs] of shaders) {
  const [v, vok, vlog] = compile(gl.VERTEX_SHADER, vs);
  const [f, fok, flog] = compile(gl.FRAGMENT_SHADER, fs);
  let linked = false, plog = '';
  if (vok && fok) {
    const p = gl.createProgram(); gl.attachShader(p, v); gl.attachShader(p, f);
    gl.linkProgram(p); linked = gl.getProgramParameter(p, gl.LINK_STATUS);
    plog = gl.getProgramInfoLog(p);
  }
  report.results.push({name, compiled: vok && fok, linked, log: vlog + flog + plog});
}
fetch('/result', {method: 'POST', body: JSON.stringify(report)});
</script></body></html>"""


def chromium_path() -> str | None:
    """The chromium executable, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def compile_in_chromium(
    shaders: list[tuple[str, str, str]], timeout: float = 120.0
) -> dict[str, Any]:
    """``{"webgl2", "renderer", "results": [{name, compiled, linked, log}]}`` for each
    (name, vertex source, fragment source)."""
    browser = chromium_path()
    if browser is None:
        raise BackendError("chromium is not installed (Debian: apt-get install chromium)")
    page = (_PAGE % json.dumps(shaders)).encode()
    done = threading.Event()
    report: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            report.update(json.loads(body))
            self.send_response(204)
            self.end_headers()
            done.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            if not done.wait(timeout):
                raise BackendError(f"chromium did not report WebGL2 results within {timeout} s")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            server.shutdown()
            server.server_close()
    return report
