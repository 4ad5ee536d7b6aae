"""Run an ``export-web`` site in a real headless Chromium: serve it on 127.0.0.1 (with the
cross-origin isolation headers that Wasm threads need) and drive the browser through
Playwright's protocol client with the system's Chromium (``playwright install`` is never
needed: the browser is ``chromium`` on PATH or ``$SPAWNML_CHROMIUM``).

    with serve(site) as url, Browser() as browser:
        result = browser.run_model(url, "webgpu", {"input": x})
        result.outputs["logits"]  # numpy arrays, read back from the page
"""

from __future__ import annotations

import atexit
import base64
import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np

from spawnml.errors import BackendUnavailableError, SpawnMLError

FLAGS = [
    "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run", "--disable-quic",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-vulkan=swiftshader",
                "--use-angle=swiftshader"]  # fmt: skip
"""SwiftShader's Vulkan and GL: WebGPU compute and WebGL2 on a machine without a GPU."""


class BrowserError(SpawnMLError):
    """The page failed: its SpawnmlError (or other exception) with the page's message."""


def chromium_path() -> str | None:
    """The Chromium to drive: ``$SPAWNML_CHROMIUM``, else ``chromium`` on PATH."""
    found = os.environ.get("SPAWNML_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    return found if found and Path(found).exists() else None


def unavailable_reason() -> str | None:
    """Why a browser cannot be driven here (None when it can)."""
    if chromium_path() is None:
        return "no Chromium (install Debian's chromium, or set SPAWNML_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install 'spawnml-web[browser]')"
    return None


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files, with cross-origin isolation (SharedArrayBuffer for Wasm threads)
    unless ``isolated`` is false."""

    isolated = True

    def end_headers(self) -> None:
        if self.isolated:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()


class _PlainHandler(_Handler):
    isolated = False

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(directory: str | Path, isolated: bool = True) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port) while in the block; yields its URL.
    ``isolated``: with the COOP/COEP headers that make pages cross-origin isolated."""
    handler = functools.partial(_Handler if isolated else _PlainHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class ModelRun:
    """What a page reported: outputs (numpy), the backend used, load and run times (ms)."""

    outputs: dict[str, np.ndarray]
    backend: str
    load: dict[str, Any]
    run_ms: list[float]


_NUMPY = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "uint32": np.uint32,
          "int64": np.int64, "uint8": np.uint8, "bool": np.bool_, "int8": np.int8,
          "int16": np.int16, "uint16": np.uint16}  # fmt: skip

_RUN_JS = """async ([moduleUrl, url, options, feeds, runs]) => {
  const { InferenceSession, Tensor } = await import(moduleUrl);
  const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const ARRAYS = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array,
    uint8: Uint8Array, bool: Uint8Array, uint32: Uint32Array, float64: Float64Array };
  const b64 = (array) => {
    const u8 = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    let text = "";
    for (let i = 0; i < u8.length; i += 32768) {
      text += String.fromCharCode(...u8.subarray(i, i + 32768));
    }
    return btoa(text);
  };
  try {
    const session = await InferenceSession.create(url, options);
    const inputs = {};
    for (const [name, f] of Object.entries(feeds)) {
      inputs[name] = new Tensor(f.dtype, new ARRAYS[f.dtype](bytes(f.data).buffer), f.shape);
    }
    const times = [];
    let result = {};
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      const outputs = await session.run(inputs);
      result = {};
      for (const [name, t] of Object.entries(outputs)) {
        const data = await t.getData(true);
        result[name] = { dtype: t.type, shape: t.dims, data: i === runs - 1 ? b64(data) : "" };
      }
      times.push(performance.now() - start);
    }
    const load = session.load;
    session.release();
    return { ok: true, outputs: result, backend: session.backend, load, times };
  } catch (error) {
    return { ok: false, error: `${error.name}: ${error.message}` };
  }
}"""


_COMPILE_WGSL_JS = """async (sources) => {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return { error: "no WebGPU adapter in this browser" };
  const open = () => adapter.requestDevice({ requiredLimits: {
    maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage } });
  let device = await open();
  const verdicts = {};
  for (const [name, code] of Object.entries(sources)) {
    const errors = [];
    try {
      device.pushErrorScope("validation");
      const module = device.createShaderModule({ code });
      const info = await module.getCompilationInfo();
      for (const m of info.messages) {
        if (m.type === "error") errors.push(`${m.lineNum}:${m.linePos}: ${m.message}`);
      }
      if (!errors.length) {
        device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
      }
      const scope = await device.popErrorScope();
      if (scope && !errors.length) errors.push(scope.message);
    } catch (error) {  // the device was lost compiling it: note it, go on with a new one
      errors.push(`device lost: ${error.message}`);
      device = await open();
    }
    verdicts[name] = errors;
  }
  device.destroy();
  return { verdicts };
}"""


_DRIVER: list[Any] = []


def _driver() -> Any:
    """Playwright's driver, started once per process (its sync API allows one at a time;
    several browsers share it) and stopped at exit."""
    if not _DRIVER:
        from playwright.sync_api import sync_playwright

        _DRIVER.append(sync_playwright().start())
        atexit.register(_DRIVER[0].stop)
    return _DRIVER[0]


class Browser:
    """A headless Chromium (WebGPU and WebGL2 on SwiftShader) driven through Playwright."""

    def __init__(self, webgpu: bool = True, extra_flags: tuple[str, ...] = ()) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"browser: {reason}")
        self._browser = _driver().chromium.launch(
            executable_path=chromium_path(), headless=True,
            args=[*FLAGS, *(WEBGPU_FLAGS if webgpu else []), *extra_flags])
        self.page = self._browser.new_page()
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._browser.close()

    def open(self, url: str) -> None:
        """Navigate to ``url`` (a page of the served site: module imports need http)."""
        self.page.goto(url)

    def evaluate(self, script: str, arg: Any = None, timeout_s: float = 600) -> Any:
        """Run an async JS function in the page with ``arg``; its JSON result."""
        self.page.set_default_timeout(timeout_s * 1000)
        return self.page.evaluate(script, arg)

    def run_model(self, site_url: str, backend: str | list[str],
                  feeds: Mapping[str, np.ndarray], runs: int = 1,
                  options: Mapping[str, Any] | None = None, runtime: str | None = None
                  ) -> ModelRun:
        """Load the export at ``site_url`` on ``backend`` in the page, run it ``runs`` times
        on ``feeds`` and return the last run's outputs; BrowserError with the page's
        message when it fails. ``runtime``: the URL of spawnml.mjs (default: the export's)."""
        runtime = runtime or site_url + "spawnml.mjs"
        origin = "/".join(runtime.split("/")[:3]) + "/"
        if not self.page.url.startswith(origin):
            self.open(origin)
        encoded = {name: {"dtype": str(a.dtype), "shape": list(a.shape),
                          "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()}
                   for name, a in feeds.items()}  # fmt: skip
        result = self.evaluate(_RUN_JS, [runtime, site_url,
                                         {"backend": backend, **(options or {})}, encoded, runs])
        if not result["ok"]:
            raise BrowserError(result["error"])
        outputs = {
            name: np.frombuffer(base64.b64decode(o["data"]), _NUMPY[o["dtype"]]).reshape(o["shape"])
            for name, o in result["outputs"].items()
        }
        return ModelRun(outputs, result["backend"], result["load"], result["times"])

    def open_pipeline(self, site_url: str, backend: str, image: str,
                      colormap: str | None = None, fallback: str | None = None,
                      timeout_s: float = 600) -> dict[str, Any]:
        """Open a pipeline page (``export-web --pipeline``) on ``backend`` with ``image`` (a
        URL, relative to the site) and wait until it has drawn its result; the page's
        report (backend, runMs, modelRuns, colorizeRuns, top); BrowserError with the
        page's message when it fails."""
        query = {"backend": backend, "image": image, "colormap": colormap, "fallback": fallback}
        self.page.goto(f"{site_url}?{urlencode({k: v for k, v in query.items() if v})}")
        self.page.wait_for_function(
            "() => globalThis.spawnmlPage?.done || globalThis.spawnmlPage?.error",
            timeout=timeout_s * 1000)
        return self._page_report()

    def _page_report(self) -> dict[str, Any]:
        report = self.page.evaluate(
            "() => { const p = globalThis.spawnmlPage; return { done: p.done,"
            " error: p.error ?? null, backend: p.backend, runMs: p.runMs,"
            " modelRuns: p.modelRuns, colorizeRuns: p.colorizeRuns,"
            " colormap: p.colormap ?? null, top: p.top ?? null, load: p.load }; }")
        if report["error"]:
            raise BrowserError(report["error"])
        return report

    def pick_colormap(self, name: str, timeout_s: float = 120) -> dict[str, Any]:
        """On a depth page: choose colour map ``name`` and wait until it is drawn."""
        self.page.select_option("#colormap", name)
        self.page.wait_for_function(
            "(name) => globalThis.spawnmlPage.colormap === name || globalThis.spawnmlPage.error",
            arg=name, timeout=timeout_s * 1000)
        return self._page_report()

    def page_output(self, name: str) -> np.ndarray:
        """Output ``name`` of the pipeline page's last run, read back from its device."""
        o = self.page.evaluate("(name) => globalThis.spawnmlPage.read(name)", name)
        return np.frombuffer(base64.b64decode(o["data"]), _NUMPY[o["dtype"]]).reshape(o["shape"])

    def compile_wgsl(self, site_url: str, sources: Mapping[str, str]) -> dict[str, list[str]]:
        """Compile each WGSL compute shader (entry point ``main``) with the browser's own
        WebGPU compiler (Chrome: Tint); the errors per name, empty when it compiles."""
        if not self.page.url.startswith(site_url):
            self.open(site_url)
        result = self.evaluate(_COMPILE_WGSL_JS, dict(sources))
        if "error" in result:
            raise BrowserError(result["error"])
        return result["verdicts"]

    def screenshot(self, path: str | Path, full_page: bool = True) -> None:
        """A PNG of the current page."""
        self.page.screenshot(path=str(path), full_page=full_page)


__all__ = ["Browser", "BrowserError", "ModelRun", "chromium_path", "serve",
           "unavailable_reason"]
