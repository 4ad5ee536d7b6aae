"""Benchmark the wasm backend on 1M-element elementwise kernels.

Compares scalar vs SIMD128 code, 1 vs 2 threads, and numpy, and prints the ratios, for a
memory-bound kernel (a*x + b*y, leaky relu: 12 bytes per element) and a compute-bound one
(tanh-GELU, whose tanh is the WAT polyfill). Run:
``python scripts/bench_wasm_elementwise.py [--n 1000000] [--repeat 20]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from spawnml.kernel import Output, Tensor, kernel
from spawnml_backend_wasm import WasmBackend


@kernel
def fused_axpby(x: Tensor, y: Tensor, out: Output, a: float, b: float):
    i = out.flat
    v = a * x.flat[i] + b * y.flat[i]
    return v if v > 0.0 else v * 0.1  # a leaky-relu epilogue keeps it more than a copy


@kernel
def gelu(x: Tensor, out: Output):
    v = x.flat[out.flat]
    return 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))  # noqa: F821


def best_of(fn, repeat: int) -> float:
    fn()  # warm: compile, instantiate per thread, grow memory
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(
    name: str, k, inputs: dict, consts: dict, want: np.ndarray, ref, repeat: int, rtol: float
) -> None:
    n = want.size
    results = {"numpy": best_of(ref, repeat)}
    for threads, simd in ((1, False), (1, True), (2, True)):
        be = WasmBackend(threads=threads, simd=simd)
        program = be.compile(k.specialize(inputs, ((n,), "float32"), **consts))
        bufs = [be.upload(v) for v in inputs.values()]
        out = be.alloc(want.nbytes)
        results[f"wasm {'simd' if simd else 'scalar'} x{threads}"] = best_of(
            lambda: be.launch(program, out, bufs),  # noqa: B023 - called before the next loop
            repeat,
        )
        got = be.download(out, (n,), "float32")
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
        be.close()
    print(f"{name}: {n} elements, best of {repeat} (device-resident buffers)")
    for label, t in results.items():
        print(f"  {label:16s} {t * 1e3:8.3f} ms   {n / t / 1e6:8.1f} Melem/s")
    s1, v1, v2 = results["wasm scalar x1"], results["wasm simd x1"], results["wasm simd x2"]
    print(f"  SIMD gain (1 thread):        {s1 / v1:5.2f}x")
    print(f"  threads gain (2 vs 1, SIMD): {v1 / v2:5.2f}x")
    print(f"  wasm simd x2 vs numpy:       {results['numpy'] / v2:5.2f}x (>1: wasm faster)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(
        f"{cores} cores available, load average {os.getloadavg()[0]:.2f} "
        "(thread gains need idle cores: a loaded machine hides them)"
    )
    r = np.random.default_rng(0)
    x, y = (r.standard_normal(args.n).astype(np.float32) for _ in range(2))
    a, b, s = np.float32(1.5), np.float32(-0.5), np.float32(0.1)

    def axpby_numpy() -> np.ndarray:
        v = a * x + b * y
        return np.where(v > 0, v, v * s)

    measure(
        "fused a*x + b*y, leaky relu",
        fused_axpby,
        {"x": x, "y": y},
        {"a": 1.5, "b": -0.5},
        axpby_numpy(),
        axpby_numpy,
        args.repeat,
        1e-6,
    )

    def gelu_numpy() -> np.ndarray:
        return 0.5 * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x**3)))

    measure("tanh-GELU", gelu, {"x": x}, {}, gelu_numpy(), gelu_numpy, args.repeat, 1e-5)


if __name__ == "__main__":
    main()
