#!/usr/bin/env python3
"""Latency of spawnml against onnxruntime on the generated models, measured in one run.

    .venv/bin/python scripts/bench_models.py [--backend cpu] [--runs 20] [MODEL ...]

Runs of the two engines are interleaved so machine load (a shared 2-core box) hits both
alike; the ratio is spawnml / onnxruntime of the median latencies at batch 1, and the last
line is their geometric mean. Both use their default threading (onnxruntime: one intra-op
thread per core; numpy: OpenBLAS threads) unless ``--ort-threads`` / ``OPENBLAS_NUM_THREADS``
say otherwise. Outputs are checked against onnxruntime first (max scaled error printed).
"""

from __future__ import annotations

import argparse

from spawnml.testing.models import GENERATED, generated_model
from spawnml.testing.models.bench import bench_model, geometric_mean, thread_settings

DEFAULT = ["squeezenet1_1", "mobilenetv2", "resnet50"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "models",
        nargs="*",
        default=DEFAULT,
        metavar="MODEL",
        help=f"generated models (default: {' '.join(DEFAULT)})",
    )
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--ort-threads", type=int, default=0, help="0: onnxruntime's default")
    args = parser.parse_args()
    print(thread_settings())
    ratios = []
    for name in args.models:
        result = bench_model(
            str(generated_model(name)),
            GENERATED[name].inputs(),
            backend=args.backend,
            runs=args.runs,
            warmup=args.warmup,
            ort_threads=args.ort_threads,
            name=name,
        )
        print(result.line(), flush=True)
        ratios.append(result.ratio)
    print(
        f"geometric-mean latency ratio spawnml/{args.backend} vs onnxruntime: "
        f"{geometric_mean(ratios):.2f}x"
    )


if __name__ == "__main__":
    main()
