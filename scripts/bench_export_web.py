"""One inference in the browser beside the Python backend on this machine, per model and
web target: `spawnml export-web` run in headless Chromium (WebGPU on SwiftShader, Wasm)
against the same backend in Python (webgpu on wgpu-native, wasm on wasmtime), with each
output's largest error against onnxruntime.

    .venv/bin/python scripts/bench_export_web.py [--runs 5] [MODEL ...]

Browser times are measured in the page (performance.now() around run + readback); Python
times around session.run. Medians over --runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import spawnml
from spawnml.cli_model import model_path
from spawnml_web import export_web
from spawnml_web.browser import Browser, serve

DEFAULT = ["squeezenet1_1", "mobilenetv2", "espcn_x3"]


def python_backend(name: str):
    if name == "wasm":
        from spawnml_backend_wasm.backend import WasmBackend

        return WasmBackend(threads=1)  # the export is one thread too
    return spawnml.get_backend(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="webgpu,webgl,wasm")
    args = parser.parse_args()
    backends = args.backends.split(",")
    print(f"{'model':14s} {'backend':7s} {'browser':>10s} {'python':>10s} {'ratio':>7s} "
          f"{'err browser':>12s} {'err python':>11s}")
    with tempfile.TemporaryDirectory() as tmp, Browser() as browser:
        for model in args.models:
            path = model_path(model)
            site = Path(tmp) / model
            export_web(path, site, backends)
            ref_session = ort.InferenceSession(path)
            rng = np.random.default_rng(0)
            feeds = {i.name: rng.random(i.shape, dtype=np.float32)
                     for i in ref_session.get_inputs()}
            names = [o.name for o in ref_session.get_outputs()]
            ref = dict(zip(names, ref_session.run(names, feeds), strict=True))

            def err(outputs: dict, ref: dict = ref) -> float:
                return max(float(np.abs(outputs[n] - r).max() / max(1.0, np.abs(r).max()))
                           for n, r in ref.items())  # fmt: skip

            with serve(Path(tmp)) as url:
                for name in backends:
                    run = browser.run_model(f"{url}{model}/", name, feeds, runs=args.runs + 1)
                    in_browser = statistics.median(run.run_ms[1:])
                    backend = python_backend(name)
                    session = spawnml.InferenceSession(path, backends=[backend])
                    got = dict(zip(names, session.run(names, feeds), strict=True))
                    times = []
                    for _ in range(args.runs):
                        start = time.perf_counter()
                        session.run(names, feeds)
                        times.append((time.perf_counter() - start) * 1e3)
                    in_python = statistics.median(times)
                    print(f"{model:14s} {name:7s} {in_browser:8.1f}ms {in_python:8.1f}ms "
                          f"x{in_browser / in_python:5.2f} {err(run.outputs):12.1e} "
                          f"{err(got):11.1e}", flush=True)


if __name__ == "__main__":
    main()
