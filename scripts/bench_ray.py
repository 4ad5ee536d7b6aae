#!/usr/bin/env python3
"""Throughput of ``spawnml batch`` on a local Ray cluster: images/s with 1 and with N actors
on the same generated images, in one run, and the ratio; each run also checked to give the
same rows as the 1-actor run.

    .venv/bin/python scripts/bench_ray.py --task classify --images 400 --actors 1,2
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_images(folder: Path, n: int, seed: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        h, w = (int(v) for v in rng.integers(64, 400, 2))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            folder / f"img{i:05d}.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="classify")
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--actors", default="1,2", help="comma-separated actor counts")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2,
                    help="CPUs of the local Ray cluster")
    args = ap.parse_args(argv)

    import ray

    from spawnml_ray import read_results, run_batch

    counts = [int(c) for c in args.actors.split(",")]
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    rows: dict[int, dict] = {}
    rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        inputs = Path(tmp) / "in"
        write_images(inputs, args.images)
        for n in counts:
            out = Path(tmp) / f"out{n}"
            start = time.perf_counter()
            report = run_batch(args.task, inputs, out, actors=n, backend=args.backend,
                               batch_size=args.batch_size, num_cpus=args.cpus / max(counts))
            wall = time.perf_counter() - start
            rates[n] = report.images_per_second
            table = read_results(out).sort_by("path").drop_columns(["worker"])
            rows[n] = table.to_pydict()
            print(f"{args.task} x{args.images} on {args.backend}, {n} actor(s): "
                  f"{report.images_per_second:.2f} images/s ({report.seconds:.1f} s of work, "
                  f"{wall:.1f} s with model shipping), {report.errors} errors", flush=True)
    ray.shutdown()
    base = counts[0]
    for n in counts[1:]:
        same = rows[n] == rows[base]
        print(f"{n} actors / {base}: x{rates[n] / rates[base]:.2f} throughput; rows "
              f"{'identical' if same else 'DIFFER'}")
        if not same:
            return 1
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"ray {ray.__version__}, {time.strftime('%Y-%m-%d')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
