#!/usr/bin/env python3
"""The cpu backend against onnxruntime at 1 and 2 threads, native code on and off (#22).

    .venv/bin/python scripts/bench_cpu_threads.py [--threads 1,2] [--jit 1,0] [--runs 10]
        [MODEL ...]

Each (threads, SPAWNML_CPU_JIT) pair runs ``scripts/bench_models.py`` in a fresh process
(OpenBLAS reads its thread count at import) with ``OPENBLAS_NUM_THREADS``,
``SPAWNML_CPU_THREADS`` and onnxruntime's ``intra_op_num_threads`` all set to the same count;
inside it spawnml and onnxruntime alternate, so each ratio comes from one run; kernels are
chosen by measurement (``SPAWNML_KERNEL_CHOICE=measure`` unless set). Prints one table of
ratios (spawnml / onnxruntime) and their geometric means.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

MODELS = ["squeezenet1_1", "mobilenetv2", "resnet50", "espcn_x3", "transformer_net",
          "bert_encoder"]
LINE = re.compile(r"^(\S+)\s.*ratio\s+([0-9.]+)x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS, metavar="MODEL")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--jit", default="1,0", help="SPAWNML_CPU_JIT values to compare")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    script = Path(__file__).with_name("bench_models.py")
    columns: dict[str, dict[str, float]] = {}
    for threads in args.threads.split(","):
        for jit in args.jit.split(","):
            env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, SPAWNML_CPU_THREADS=threads,
                       SPAWNML_CPU_JIT=jit)
            env.setdefault("SPAWNML_KERNEL_CHOICE", "measure")
            label = f"{threads} thr, {'native' if jit == '1' else 'numpy'}"
            print(f"== {label}", flush=True)
            out = subprocess.run(
                [sys.executable, str(script), "--runs", str(args.runs), "--ort-threads",
                 threads, *args.models], env=env, capture_output=True, text=True, check=False)
            print(out.stdout + out.stderr, flush=True)
            columns[label] = {m.group(1): float(m.group(2)) for line in out.stdout.splitlines()
                              if (m := LINE.match(line))}
    labels = list(columns)
    print("| model | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for model in args.models:
        cells = [f"x{columns[c][model]:.2f}" if model in columns[c] else "-" for c in labels]
        print(f"| {model} | " + " | ".join(cells) + " |")
    means = []
    for c in labels:
        values = list(columns[c].values())
        product = 1.0
        for v in values:
            product *= v
        means.append(f"x{product ** (1 / len(values)):.2f}" if values else "-")
    print("| geomean | " + " | ".join(means) + " |")


if __name__ == "__main__":
    main()
