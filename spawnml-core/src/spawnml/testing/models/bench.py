"""Latency of spawnml against onnxruntime on one model, measured in the same run.

Runs of the two engines are interleaved so machine load hits both alike; results carry
medians and minima. Used by ``scripts/bench_models.py`` (and meant for ``spawnml bench``).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...session import InferenceSession
from . import max_scaled_error


@dataclass
class BenchResult:
    model: str
    backend: str
    ours: list[float]  # seconds per run
    theirs: list[float]
    max_scaled_error: float
    kinds: dict[str, int] = field(default_factory=dict)  # placement kinds (kernel/portable/…)

    @property
    def ratio(self) -> float:
        """spawnml / onnxruntime, median latencies."""
        return statistics.median(self.ours) / statistics.median(self.theirs)

    def line(self) -> str:
        ours, theirs = 1e3 * statistics.median(self.ours), 1e3 * statistics.median(self.theirs)
        return (
            f"{self.model:14s} {self.backend:7s} spawnml {ours:8.2f} ms "
            f"(min {1e3 * min(self.ours):7.2f})  onnxruntime {theirs:7.2f} ms "
            f"(min {1e3 * min(self.theirs):6.2f})  ratio {self.ratio:6.2f}x  "
            f"max scaled err {self.max_scaled_error:.1e}  nodes {self.kinds}"
        )


def bench_model(
    path: str,
    feeds: dict[str, np.ndarray],
    *,
    backend: str = "cpu",
    runs: int = 20,
    warmup: int = 3,
    ort_threads: int = 0,
    name: str = "",
) -> BenchResult:
    """Time ``runs`` interleaved batch runs of onnxruntime (CPU provider) and spawnml."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if ort_threads:
        options.intra_op_num_threads = ort_threads
    reference = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    with InferenceSession(path, backends=[backend]) as session:
        error = max_scaled_error(session.run(None, feeds), reference.run(None, feeds))
        for _ in range(warmup):
            reference.run(None, feeds)
            session.run(None, feeds)
        ours, theirs = [], []
        for _ in range(runs):
            start = time.perf_counter()
            reference.run(None, feeds)
            middle = time.perf_counter()
            session.run(None, feeds)
            end = time.perf_counter()
            theirs.append(middle - start)
            ours.append(end - middle)
        kinds = dict(Counter(session.placement().kinds.values()))
    return BenchResult(name or os.path.basename(path), backend, ours, theirs, error, kinds)


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def thread_settings() -> str:
    """The environment that decides CPU threading and BLAS kernels (printed with results)."""
    keys = ["OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "SPAWNML_CPU_THREADS",
            "SPAWNML_CPU_JIT"]
    found = ", ".join(f"{k}={os.environ[k]}" for k in keys if k in os.environ)
    return f"cpus {os.cpu_count()}; {found or 'no thread env vars'}"
