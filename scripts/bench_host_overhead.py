#!/usr/bin/env python3
"""Host cost per launched node: a chain of 300 MatMul nodes (each 1x8 . 8x8, weights as
initializers) on every available backend beside onnxruntime, measured in one run.

    .venv/bin/python scripts/bench_host_overhead.py [--nodes 300] [--runs 200] [--block 20]
                                                    [--backends cpu,opencl,...] [--json FILE]

Method: one session per backend and one onnxruntime session (CPU provider, default
threading) on the same generated model and feed; outputs are checked against onnxruntime
first. Contenders are timed in alternating blocks of ``--block`` runs (a settle pause and one
untimed run before each block, ``spawnml.cli_model._time_interleaved``) so that load on the
shared machine hits all alike; each timed run is one ``session.run(None, feed)``
(feed upload, every launch, output download).

    us per node = (median run time - device time of the same kernels) / nodes

The device time is subtracted only where the device itself measures it (``session.profile``
reports ``device_timing`` "events": OpenCL profiling events; "queries": GL timer queries on
WebGL; "timestamps": WebGPU timestamp queries), taken as the median over profiled runs made
after the timed ones (each profiled launch runs alone, so this is the kernels' own time).
Elsewhere (cpu and wasm run kernels on the calling thread; webgpu is timed with
synchronize) nothing is subtracted: the whole median run counts as host cost, an upper
bound. Where the device's own times (launches profiled one at a time, serialised) add up to
more than a whole run, nothing is subtracted either. The script prints both ``run/node``
(median run / nodes, nothing subtracted) and ``host/node``; the ratio column is host/node
against onnxruntime's per-node cost from the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import spawnml
from spawnml.cli_model import _time_interleaved
from spawnml.profile import MEASURED
from spawnml.session import InferenceSession


def chain_model(nodes: int, width: int = 8, seed: int = 0) -> bytes:
    """x[1, width] through ``nodes`` MatMuls with width x width weights (as initializers)."""
    rng = np.random.default_rng(seed)
    inits, graph_nodes = [], []
    prev = "x"
    for i in range(nodes):
        # Orthogonal weights keep the values O(1) along the whole chain.
        q, _ = np.linalg.qr(rng.standard_normal((width, width)))
        inits.append(numpy_helper.from_array(q.astype(np.float32), f"w{i}"))
        out = "y" if i == nodes - 1 else f"h{i}"
        graph_nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    graph = helper.make_graph(
        graph_nodes,
        "matmul_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def device_seconds(session: InferenceSession, feed: dict, runs: int) -> tuple[float, str]:
    """Median device time per run where measured apart from the host, else (0, method)."""
    profile = getattr(session, "profile", None)
    if profile is None:
        return 0.0, "none (no profiler)"
    per_run = []
    method = ""
    for _ in range(runs):
        p = profile(feed, runs=1)
        method = p.device_timing
        per_run.append(p.device_s)
    if method not in MEASURED:
        return 0.0, f"not subtracted ({method})"
    return statistics.median(per_run), method


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=200, help="timed runs per contender")
    parser.add_argument("--block", type=int, default=20, help="runs per alternating block")
    parser.add_argument("--backends", help="comma-separated (default: every available one)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    model = chain_model(args.nodes)
    feed = {"x": np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)}
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = reference.run(None, feed)[0]
    backends = args.backends.split(",") if args.backends else spawnml.get_available_backends()
    sessions: dict[str, InferenceSession] = {}
    runs = {"onnxruntime": lambda: reference.run(None, feed)}
    for name in backends:
        try:
            sess = InferenceSession(model, backends=[name], strict=True)
            got = sess.run(None, feed)[0]
        except spawnml.SpawnMLError as exc:
            print(f"{name}: skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        err = float(np.max(np.abs(got - want)))
        if err > 1e-3:
            print(f"{name}: wrong result (max abs error {err:.3g}); skipped", file=sys.stderr)
            continue
        sessions[name] = sess
        runs[name] = lambda s=sess: s.run(None, feed)
    times = _time_interleaved(runs, args.runs, block=args.block)
    ort_us = statistics.median(times["onnxruntime"]) / args.nodes * 1e6
    results = {}
    print(f"{args.nodes}-node MatMul chain (1x8 . 8x8), {args.runs} runs per contender, "
          f"blocks of {args.block}")  # fmt: skip
    print(f"{'engine':12s} {'median run':>12s} {'run/node':>9s} {'device/run':>11s} "
          f"{'host/node':>10s} {'x onnxruntime':>14s}  device time")  # fmt: skip
    for name, t in times.items():
        median = statistics.median(t)
        device, method = (0.0, "-")
        if name in sessions:
            device, method = device_seconds(sessions[name], feed, 20)
        if device > median:  # launches profiled one by one took longer than a whole run
            method += f" ({device * 1e3:.3f} ms > the run: not subtracted)"
            device = 0.0
        run_us = median / args.nodes * 1e6
        us = (median - device) / args.nodes * 1e6
        results[name] = {"median_run_s": median, "run_us_per_node": run_us, "device_s": device,
                         "us_per_node": us, "ratio_vs_onnxruntime": us / ort_us,
                         "device_timing": method}  # fmt: skip
        print(f"{name:12s} {median * 1e3:9.3f} ms {run_us:9.2f} {device * 1e3:8.3f} ms "
              f"{us:10.2f} {us / ort_us:13.1f}x  {method}")  # fmt: skip
    for sess in sessions.values():
        sess.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"nodes": args.nodes, "runs": args.runs, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
