#!/usr/bin/env python3
"""spawnml on each backend against onnxruntime-cpu and tinygrad on the same devices, one run.

    .venv/bin/python scripts/bench_peers.py [--backends opencl,webgpu,webgl,wasm]
        [--tinygrad CL,WEBGPU] [--runs 5] [--ort-threads 2] [MODEL ...]

For every model (default: SqueezeNet 1.1, MobileNetV2, ResNet-50, generated with random
weights) it times the median latency at batch 1 of onnxruntime (the reference, 2 intra-op
threads), spawnml on each backend (a session replaying its recorded plan) and tinygrad
(``pip install tinygrad``; ``DEV=CL`` on PoCL, ``DEV=WEBGPU`` through the ``dawn-python``
wheel on lavapipe) in a child process each, and checks every contender's output against
onnxruntime's (max absolute difference, scaled by the largest reference value). The table
shows milliseconds, the ratio to onnxruntime and the scaled error (``!``: above 1e-3, a
wrong answer); the last lines are geometric means.
Contenders that are not installed are reported as such, never silently dropped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

DEFAULT = ["squeezenet1_1", "mobilenetv2", "resnet50"]

_TINYGRAD_CHILD = r"""
import json, sys, time
import numpy as np
from tinygrad import Tensor, TinyJit
from tinygrad.nn.onnx import OnnxRunner
path, feed, name, runs, out = sys.argv[1:6]
runner = OnnxRunner(path)
x = np.load(feed)
@TinyJit
def step(t):
    return next(iter(runner({name: t}).values())).realize()
times, y = [], None
for i in range(3 + int(runs)):
    t = Tensor(x).realize()
    start = time.perf_counter()
    y = step(t).numpy()
    times.append(time.perf_counter() - start)
np.save(out, y)
print(json.dumps({"median_ms": float(np.median(times[3:]) * 1e3)}))
"""


def _median_ms(fn, runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def _error(y: np.ndarray, ref: np.ndarray) -> float:
    y = np.asarray(y, np.float64).reshape(ref.shape)
    return float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-12))


def _tinygrad(
    dev: str, path: Path, x: np.ndarray, name: str, runs: int
) -> tuple[float, np.ndarray | str]:
    env = dict(os.environ, DEV=dev, CC=os.environ.get("CC", "clang-15"))
    env.setdefault("CACHEDB", str(Path.home() / ".cache" / "tinygrad" / "cache.db"))
    dawn = Path(sysconfig.get_paths()["purelib"]) / "pydawn" / "lib"
    lib = dawn / f"libwebgpu_dawn_{platform.machine()}.so"
    if lib.is_file():  # the dawn-python wheel names its library by machine
        env.setdefault("WEBGPU_PATH", str(lib))
    with tempfile.TemporaryDirectory() as tmp:
        feed, out = Path(tmp) / "x.npy", Path(tmp) / "y.npy"
        np.save(feed, x)
        proc = subprocess.run(
            [sys.executable, "-c", _TINYGRAD_CHILD, str(path), str(feed), name, str(runs),
             str(out)], env=env, capture_output=True, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            return math.nan, (proc.stderr.strip().splitlines() or ["failed"])[-1][:120]
        return json.loads(proc.stdout.strip().splitlines()[-1])["median_ms"], np.load(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT, metavar="MODEL")
    parser.add_argument("--backends", default="opencl,webgpu,webgl,wasm")
    parser.add_argument("--tinygrad", default="CL,WEBGPU", help="devices; empty: none")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ort-threads", type=int, default=2)
    args = parser.parse_args()

    import onnxruntime as ort

    import spawnml
    from spawnml.testing.models import generated_model

    backends = [b for b in args.backends.split(",") if b]
    devices = [d for d in args.tinygrad.split(",") if d]
    try:
        import tinygrad  # noqa: F401
    except ImportError:
        print("tinygrad: not installed (pip install tinygrad); its columns are skipped")
        devices = []
    columns = [*backends, *(f"tinygrad-{d}" for d in devices)]
    ratios: dict[str, list[float]] = {c: [] for c in columns}
    print(f"{'model':16s} {'onnxruntime':>12s} " + " ".join(f"{c:>24s}" for c in columns))
    for model in args.models:
        path = generated_model(model)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.ort_threads
        ref_sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        inp = ref_sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        x = np.random.default_rng(0).random(shape, dtype=np.float32)
        ref = ref_sess.run(None, {inp.name: x})[0].astype(np.float64)
        feeds = {inp.name: x}
        ort_ms = _median_ms(lambda s=ref_sess, f=feeds: s.run(None, f), args.runs * 4)
        cells = []
        for b in backends:
            try:
                sess = spawnml.InferenceSession(str(path), backends=[b])
                y = sess.run(None, feeds)[0]
                ms = _median_ms(lambda s=sess, f=feeds: s.run(None, f), args.runs)
                err: float | str = _error(y, ref)
            except Exception as exc:  # noqa: BLE001 - report and go on to the next contender
                ms, err = math.nan, f"{type(exc).__name__}: {exc}"[:60]
            cells.append((b, ms, err))
        for d in devices:
            ms, y_or_err = _tinygrad(d, path, x, inp.name, args.runs)
            err = y_or_err if isinstance(y_or_err, str) else _error(y_or_err, ref)
            cells.append((f"tinygrad-{d}", ms, err))
        text = []
        for name, ms, err in cells:
            if math.isnan(ms) or isinstance(err, str):
                text.append(f"{'failed':>24s}")
                print(f"  {model} {name}: {err}", file=sys.stderr)
                continue
            ratios[name].append(ms / ort_ms)
            bad = "" if err < 1e-3 else "!"
            text.append(f"{ms:8.1f}ms x{ms / ort_ms:6.1f} e{err:.0e}{bad}".rjust(24))
        print(f"{model:16s} {ort_ms:9.2f} ms " + " ".join(text), flush=True)
    print("geometric mean of the ratios to onnxruntime-cpu "
          f"({args.ort_threads} threads, same run):")
    for name, rs in ratios.items():
        if rs:
            print(f"  {name:18s} x{math.exp(sum(map(math.log, rs)) / len(rs)):.1f} "
                  f"over {len(rs)} model(s)")


if __name__ == "__main__":
    main()
