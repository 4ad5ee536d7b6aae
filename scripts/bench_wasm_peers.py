#!/usr/bin/env python3
"""spawnml's wasm backend against onnxruntime-web's wasm backend in node, one run.

    .venv/bin/python scripts/bench_wasm_peers.py [--threads 1,2] [--runs 5] [MODEL ...]

Both compile Wasm SIMD128 to native code on this CPU, so this is the like-for-like peer of
the wasm backend (issue #18). For every model (default: SqueezeNet 1.1, MobileNetV2,
ResNet-50, generated with random weights) and thread count it times the median latency at
batch 1 of onnxruntime-web 1.31 (npm, installed with ``--ignore-scripts`` into
``~/.cache/spawnml/npm`` on first use, never vendored; run in a node child process) and of
spawnml's wasm backend at the same thread count (a session replaying its recorded plan),
and checks both outputs against onnxruntime-cpu (max absolute difference scaled by the
largest reference value; ``!`` marks a scaled error above 1e-4). The last lines are the
geometric means of spawnml / onnxruntime-web per thread count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import DEFAULT, _error, _median_ms

ORT_WEB_VERSION = "1.31"
CHILD = Path(__file__).resolve().parent / "peers" / "ort_web_bench.mjs"


def ort_web_dir() -> Path:
    """onnxruntime-web's package folder, installed into the npm cache on first use."""
    cache = Path(os.environ.get("SPAWNML_CACHE", Path.home() / ".cache" / "spawnml")) / "npm"
    package = cache / "node_modules" / "onnxruntime-web"
    if not (package / "dist").is_dir():
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not installed: cannot install onnxruntime-web")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
             f"onnxruntime-web@{ORT_WEB_VERSION}"], cwd=cache, check=True,
            stdout=subprocess.DEVNULL,
        )
    return package


def ort_web(path: Path, x: np.ndarray, threads: int, runs: int) -> tuple[float, np.ndarray | str]:
    """(median ms, output) of onnxruntime-web's wasm backend in node, or (nan, the error)."""
    with tempfile.TemporaryDirectory() as tmp:
        feed, out = Path(tmp) / "x.bin", Path(tmp) / "y.bin"
        feed.write_bytes(np.ascontiguousarray(x, np.float32).tobytes())
        proc = subprocess.run(
            ["node", str(CHILD), str(ort_web_dir()), str(path), str(feed),
             ",".join(map(str, x.shape)), str(threads), str(runs), str(out)],
            capture_output=True, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            return math.nan, (proc.stderr.strip().splitlines() or ["failed"])[-1][:120]
        ms = json.loads(proc.stdout.strip().splitlines()[-1])["median_ms"]
        return ms, np.frombuffer(out.read_bytes(), np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT, metavar="MODEL")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import onnxruntime as ort

    import spawnml
    from spawnml.testing.models import generated_model
    from spawnml_backend_wasm import WasmBackend

    counts = [int(t) for t in args.threads.split(",") if t]
    ratios: dict[int, list[float]] = {t: [] for t in counts}
    print(f"{'model':14s} {'threads':>7s} {'ort-web':>20s} {'spawnml wasm':>20s} {'ratio':>7s}")
    for model in args.models:
        path = generated_model(model)
        ref_sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        inp = ref_sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        x = np.random.default_rng(0).random(shape, dtype=np.float32)
        ref = ref_sess.run(None, {inp.name: x})[0].astype(np.float64)
        for t in counts:
            web_ms, web_y = ort_web(path, x, t, args.runs)
            backend = WasmBackend(threads=t)
            try:
                sess = spawnml.InferenceSession(str(path), backends=[backend])
                feeds = {inp.name: x}
                y = sess.run(None, feeds)[0]
                ms = _median_ms(lambda s=sess, f=feeds: s.run(None, f), args.runs)
                err: float | str = _error(y, ref)
            except Exception as exc:  # noqa: BLE001 - report and go on
                ms, err = math.nan, f"{type(exc).__name__}: {exc}"[:80]
            finally:
                backend.close()
            web_err = web_y if isinstance(web_y, str) else _error(web_y, ref)
            cells = []
            for value, e in ((web_ms, web_err), (ms, err)):
                if isinstance(e, str) or math.isnan(value):
                    cells.append(f"{'failed':>20s}")
                    print(f"  {model} t={t}: {e}", file=sys.stderr)
                else:
                    cells.append(f"{value:8.1f}ms e{e:.0e}{'!' if e > 1e-4 else ' '}".rjust(20))
            ratio = ms / web_ms
            if not math.isnan(ratio):
                ratios[t].append(ratio)
            print(f"{model:14s} {t:7d} {cells[0]} {cells[1]} {f'x{ratio:.2f}':>7s}", flush=True)
    print("geometric mean of spawnml wasm / onnxruntime-web wasm (same run, same threads):")
    for t, rs in ratios.items():
        if rs:
            print(f"  {t} thread(s): x{math.exp(sum(map(math.log, rs)) / len(rs)):.2f} "
                  f"over {len(rs)} model(s)")


if __name__ == "__main__":
    main()
