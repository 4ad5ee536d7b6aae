"""Benchmark: the CPU executor vs hand-written numpy on 1M elements (issue #3, target <= 5x).

Prints, per kernel, the median time of the generated numpy code (compile excluded) and of the
numpy expression a person would write, and their ratio. Run: python scripts/bench_kernels_cpu.py
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import numpy as np

from spawnml import get_backend
from spawnml.testing import suite_kernels as K

N = 1 << 20
REPEAT = 15


def median_time(fn) -> float:
    fn()  # warm up (compile, caches)
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    be = get_backend("cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    m2 = x.reshape(1024, 1024)
    row = rng.standard_normal(1024).astype(np.float32)
    benches = [
        ("relu", K.relu, [x], (N,), {}, lambda: np.maximum(x, 0)),
        ("sigmoid", K.sigmoid, [x], (N,), {}, lambda: 1 / (1 + np.exp(-x))),
        (
            "gelu_tanh",
            K.gelu_tanh,
            [x],
            (N,),
            {},
            lambda: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
        ),
        (
            "add_broadcast (1024x1024 + 1024)",
            K.add_broadcast,
            [m2, row],
            (1024, 1024),
            {},
            lambda: m2 + row,
        ),
        ("mul (same shape)", K.binary, [x, y], (N,), {"op": 0}, lambda: x * y),
        (
            "reduce_sum rows (1024x1024 -> 1024)",
            K.reduce,
            [m2],
            (1024,),
            {"axis": 1, "op": 0},
            lambda: m2.sum(1),
        ),
        (
            "reduce_max cols (1024x1024 -> 1024)",
            K.reduce,
            [m2],
            (1024,),
            {"axis": 0, "op": 1},
            lambda: m2.max(0),
        ),
        (
            "info: softmax_fused (O(row) work per element)",
            K.softmax_fused,
            [m2],
            (1024, 1024),
            {},
            lambda: (lambda e: e / e.sum(1, keepdims=True))(np.exp(m2 - m2.max(1, keepdims=True))),
        ),
        (
            "softmax_stats rows (1024x1024 -> 1024x2)",
            K.softmax_stats,
            [m2],
            (1024, 2),
            {},
            lambda: (lambda m: np.stack([m[:, 0], np.exp(m2 - m).sum(1)], 1))(
                m2.max(1, keepdims=True)
            ),
        ),
    ]
    print(f"{'kernel':40s} {'spawnml ms':>11s} {'numpy ms':>9s} {'ratio':>6s}")
    ratios = []
    for name, kern, inputs, out_shape, consts, ref in benches:
        spec = kern.specialize(inputs, (out_shape, "float32"), **consts)
        program = be.compile(spec)
        bufs = [be.upload(a) for a in inputs]
        out = be.alloc(math.prod(out_shape) * 4)
        t_k = median_time(lambda p=program, o=out, b=bufs: be.launch(p, o, b))
        t_n = median_time(ref)
        got = be.download(out, out_shape, "float32")
        np.testing.assert_allclose(got, ref(), rtol=1e-4, atol=1e-4)
        ratio = t_k / t_n
        ratios.append(ratio)
        print(f"{name:40s} {t_k * 1e3:11.2f} {t_n * 1e3:9.2f} {ratio:6.2f}")
    gated = [r for (name, *_), r in zip(benches, ratios) if not name.startswith("info")]
    worst = max(gated)
    print(
        f"geometric mean ratio {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}, "
        f"worst elementwise/reduction {worst:.2f} (target <= 5; 'info' rows not gated)"
    )
    return 0 if worst <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
