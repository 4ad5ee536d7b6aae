#!/usr/bin/env python3
"""Draw the README's benchmark figure (docs/images/bench.png) from saved ``spawnml bench``
results; needs the ``plot`` extra (matplotlib, in the dev venv).

    .venv/bin/python scripts/make_readme_plots.py [BENCH_JSON] [--out docs/images/bench.png]

BENCH_JSON (default build/bench-readme.json) is written, on the machine the README speaks
of, by:

    spawnml bench squeezenet1_1 mobilenetv2 --backends cpu,opencl,webgpu,wasm \\
        --against onnxruntime --runs 5 --json build/bench-readme.json

The script prints when that file was written and the command, to quote beside the figure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from spawnml.errors import SpawnMLError
from spawnml.plot import plot_bench

ROOT = Path(__file__).resolve().parents[1]
COMMAND = (
    "spawnml bench squeezenet1_1 mobilenetv2 --backends cpu,opencl,webgpu,wasm "
    "--against onnxruntime --runs 5 --json build/bench-readme.json"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("bench_json", nargs="?", type=Path,
                        default=ROOT / "build" / "bench-readme.json")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "bench.png")
    args = parser.parse_args(argv)
    try:
        data = json.loads(args.bench_json.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read bench results {args.bench_json}: {exc}\nmake them with:\n  {COMMAND}",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        out = plot_bench(data, args.out)
    except SpawnMLError as exc:
        print(exc, file=sys.stderr)
        return 2
    written = datetime.datetime.fromtimestamp(args.bench_json.stat().st_mtime)
    print(f"wrote {out}")
    print(f"from {args.bench_json}, written {written:%Y-%m-%d %H:%M}, by:\n  {COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
