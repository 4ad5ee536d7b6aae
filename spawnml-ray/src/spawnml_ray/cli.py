"""``spawnml batch TASK INPUT OUTPUT``: a pipeline over a folder of images on Ray."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .tasks import TASKS


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def cmd_batch(args: argparse.Namespace) -> int:
    from .job import run_batch

    options: dict[str, Any] = {}
    if args.top_k is not None:
        options["top_k"] = args.top_k
    report = run_batch(
        args.task, args.input, args.output, model=args.model, backend=args.backend,
        actors=args.actors, batch_size=args.batch_size, num_cpus=args.num_cpus,
        num_gpus=args.num_gpus, address=args.address, ship=args.ship, options=options,
        retry_errors=args.retry_errors, cluster_cpus=args.cluster_cpus,
        progress=args.progress)
    print(f"batch {args.task}: {report.summary()} -> {report.output}", file=sys.stderr)
    return 0


def add_command(sub: Any) -> None:
    """Register ``batch`` on the ``spawnml`` subparsers object."""
    p = sub.add_parser(
        "batch", help="run a pipeline over a folder of images on Ray (resumable)",
        description=(
            "Run a pipeline task over every image of INPUT (a folder, searched recursively, "
            "or a .parquet/.csv with a 'path' column) with Ray actors, one pipeline per actor. "
            "Writes OUTPUT/results/part-*.parquet (one row per image: the task's columns, the "
            "backend, an 'error' column) and the output images under OUTPUT, mirroring "
            "INPUT's layout. A rerun skips images that already have a row."))
    p.add_argument("task", choices=sorted(TASKS), help="the pipeline task")
    p.add_argument("input", help="folder of images, or .parquet/.csv with a 'path' column")
    p.add_argument("output", help="output folder (created; results are added to it)")
    p.add_argument("--address", default="local",
                   help="'local' starts a Ray cluster on this machine (default); 'auto' joins "
                        "the running one; ray://HOST:PORT connects to a remote one")
    p.add_argument("--actors", type=_positive(int), default=1,
                   help="actors, each holding one pipeline (default 1)")
    p.add_argument("-b", "--backend", default=None,
                   help="backend or comma-separated preference list, chosen per node from "
                        "what that node has (default: every available one, in spawnml's "
                        "order)")
    p.add_argument("-m", "--model", default=None,
                   help="model: a path or a known name (default: the task's default model); "
                        "shipped once per node")
    p.add_argument("--ship", choices=["object-store", "shared-path"], default="object-store",
                   help="how the model reaches the workers (default object-store; "
                        "shared-path: every node reads the same path, checked by sha256)")
    p.add_argument("--batch-size", type=_positive(int), default=8,
                   help="images per batch, and per Parquet part (default 8)")
    p.add_argument("--num-cpus", type=_positive(float), default=1.0,
                   help="CPUs reserved per actor (default 1)")
    p.add_argument("--num-gpus", type=float, default=0.0,
                   help="GPUs reserved per actor (default 0)")
    p.add_argument("--cluster-cpus", type=_positive(int), default=None,
                   help="CPUs of the local cluster (default: all of this machine's)")
    p.add_argument("-k", "--top-k", type=_positive(int), default=None,
                   help="classify: labels kept per image in the top_k column (default 5)")
    p.add_argument("--retry-errors", action="store_true",
                   help="run again the images whose earlier row is an error")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(func=cmd_batch)
