#!/usr/bin/env python3
"""GEMM throughput (GFLOP/s) of spawnml per backend beside numpy's BLAS and onnxruntime.

    .venv/bin/python scripts/bench_gemm.py [--backends cpu,opencl,webgpu,webgl,wasm]
        [--sizes 512x512x512,1024x1024x4096] [--runs 3]

Each size ``MxNxK`` is a one-node ONNX ``MatMul`` of an (M, K) input by a (K, N) weight
(an initializer, so it stays on the device); every contender computes the same product in
the same run, its output is checked against numpy (max error relative to the largest
value), and the median time of ``--runs`` runs after one warm-up gives GFLOP/s = 2MNK / t.
spawnml's time includes uploading the input and reading back the result, like a user's
``session.run``; onnxruntime's does too.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(m: int, n: int, k: int, w: np.ndarray) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])], "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _median_s(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cpu,opencl,webgpu,webgl,wasm")
    parser.add_argument("--sizes", default="512x512x512,1024x1024x4096")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import onnxruntime as ort

    import spawnml

    rng = np.random.default_rng(0)
    for size in args.sizes.split(","):
        m, n, k = (int(v) for v in size.split("x"))
        a = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((k, n), dtype=np.float32)
        ref = a.astype(np.float64) @ w.astype(np.float64)
        scale = float(np.abs(ref).max())
        flops = 2.0 * m * n * k
        model = _model(m, n, k, w)
        print(f"MatMul M={m} N={n} K={k} ({flops / 1e9:.2f} GFLOP)")
        contenders = {"numpy (BLAS)": lambda a=a, w=w: a @ w}
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        contenders["onnxruntime"] = lambda sess=sess, a=a: sess.run(None, {"a": a})[0]
        for b in args.backends.split(","):
            try:
                s = spawnml.InferenceSession(model, backends=[b])
            except Exception as exc:  # noqa: BLE001 - report, go on
                print(f"  {'spawnml ' + b:22s} unavailable: {type(exc).__name__}: {exc}"[:110])
                continue
            contenders[f"spawnml {b}"] = lambda s=s, a=a: s.run(None, {"a": a})[0]
        base = None
        for name, fn in contenders.items():
            err = float(np.abs(np.asarray(fn(), np.float64) - ref).max() / scale)
            seconds = _median_s(fn, args.runs)
            gflops = flops / seconds / 1e9
            base = base or gflops
            flag = "" if err < 1e-4 else "  WRONG"
            print(f"  {name:22s} {seconds * 1e3:10.1f} ms {gflops:8.2f} GFLOP/s "
                  f"({gflops / base:6.3f} x numpy) err {err:.1e}{flag}", flush=True)


if __name__ == "__main__":
    main()
