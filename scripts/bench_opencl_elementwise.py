"""Benchmark: OpenCL (PoCL on this CPU) vs numpy on 1M-element elementwise kernels (issue #4).

Warm timings: compile and the first launch are excluded; each spawnml time is one launch plus
waiting for the queue (the data stays on the device, as between a model's layers). Target:
within 3x of numpy. Run: python scripts/bench_opencl_elementwise.py [--check]
(--check exits 1 when a ratio is over the target).
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import numpy as np

from spawnml.testing import suite_kernels as K
from spawnml_backend_opencl import OpenCLBackend

N = 1 << 20
REPEAT = 30
TARGET = 3.0


def median_time(fn) -> float:
    fn()  # warm up
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    info = OpenCLBackend.probe()
    if not info.available:
        print(f"opencl unavailable: {info.reason}")
        return 2
    be = OpenCLBackend()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    m2 = x.reshape(1024, 1024)
    row = rng.standard_normal(1024).astype(np.float32)
    benches = [
        ("relu", K.relu, [x], (N,), {}, lambda: np.maximum(x, 0)),
        ("sigmoid", K.sigmoid, [x], (N,), {}, lambda: 1 / (1 + np.exp(-x))),
        ("gelu_tanh", K.gelu_tanh, [x], (N,), {},
         lambda: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))),
        ("add_broadcast (1024x1024 + 1024)", K.add_broadcast, [m2, row], (1024, 1024), {},
         lambda: m2 + row),
        ("mul (same shape)", K.binary, [x, y], (N,), {"op": 0}, lambda: x * y),
    ]
    print(f"device: {info.device}")
    print(f"{'kernel':36s} {'opencl ms':>10s} {'numpy ms':>9s} {'ratio':>6s}")
    worst = 0.0
    for name, kern, inputs, out_shape, consts, ref in benches:
        spec = kern.specialize(inputs, (out_shape, "float32"), **consts)
        t0 = time.perf_counter()
        program = be.compile(spec)
        t_compile = time.perf_counter() - t0
        bufs = [be.upload(a) for a in inputs]
        out = be.alloc(math.prod(out_shape) * 4)

        def run(program=program, out=out, bufs=bufs) -> None:
            be.launch(program, out, bufs)
            be.synchronize()

        t_k, t_n = median_time(run), median_time(ref)
        got = be.download(out, out_shape, "float32")
        np.testing.assert_allclose(got, np.asarray(ref()).reshape(out_shape), rtol=2e-5, atol=2e-6)
        ratio = t_k / t_n
        worst = max(worst, ratio)
        print(f"{name:36s} {t_k * 1e3:10.3f} {t_n * 1e3:9.3f} {ratio:6.2f}"
              f"   (compile {t_compile * 1e3:.0f} ms)")
        for b in (*bufs, out):
            be.free(b)
    verdict = "within" if worst <= TARGET else "OVER"
    print(f"worst ratio {worst:.2f} ({verdict} the {TARGET:g}x target)")
    return 1 if "--check" in sys.argv and worst > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
