#!/usr/bin/env python3
"""Fuzz spawnml with mutated and generated ONNX models, judged against onnxruntime.

    .venv/bin/python scripts/fuzz.py [--mutations 10000] [--graphs 2000] [--backends cpu]
        [--seed 0] [--timeout 20] [--json out.json] [--save-failures DIR]
    .venv/bin/python scripts/fuzz.py --reproduce graph:123 --backends cpu
    .venv/bin/python scripts/fuzz.py --selftest

Each case runs in a worker process (``spawnml.testing.fuzz.workers``), so crashes and hangs
are counted. Backends other than cpu get at most ``--other`` cases of each kind (default
300). Prints the counts per backend and every bug group with reproducers; exits 1 when any
case crashed, hung, raised a non-SpawnMLError exception or differs from both oracles.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import traceback
from collections.abc import Iterator

from spawnml.testing.fuzz import faults
from spawnml.testing.fuzz.cases import KINDS, case_seed, make_case
from spawnml.testing.fuzz.oracle import (
    CRASH,
    FATAL,
    FOREIGN,
    HANG,
    MISMATCH,
    REFUSED_VALID,
    judge,
    run_spawnml,
)
from spawnml.testing.fuzz.report import Report
from spawnml.testing.fuzz.workers import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, Task, WorkerPool


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mutations", type=int, default=10_000, help="mutated-model cases (cpu)")
    p.add_argument("--graphs", type=int, default=2_000, help="generated-graph cases (cpu)")
    p.add_argument("--backends", default="cpu", help="comma-separated spawnml backends")
    p.add_argument("--other", type=int, default=300,
                   help="at most this many cases of each kind on a backend other than cpu")
    p.add_argument("--seed", type=int, default=0, help="base seed: case i has seed S*1e6+i")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    p.add_argument("--workers", type=int, default=1, help="worker processes")
    p.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB,
                   help="data-segment limit per worker (0: none)")
    p.add_argument("--json", help="write counts and groups as JSON here")
    p.add_argument("--save-failures", metavar="DIR",
                   help="save .onnx/.npz/.json of each example of a fatal or refused-valid group")
    p.add_argument("--examples", type=int, default=3, help="examples kept per group")
    p.add_argument("--reproduce", metavar="KIND:SEED",
                   help="run one case in this process and print its traceback")
    p.add_argument("--selftest", action="store_true",
                   help="check that the fuzzer classifies deliberate faults")
    p.add_argument("--verbose", action="store_true", help="print every fatal outcome at once")
    return p.parse_args(argv)


def _tasks(args: argparse.Namespace, backends: list[str]) -> Iterator[Task]:
    for backend in backends:
        for kind, count in (("mutation", args.mutations), ("graph", args.graphs)):
            n = count if backend == "cpu" else min(count, args.other)
            for i in range(n):
                yield Task(make_case(kind, case_seed(args.seed, i)), backend)


def _reproduce(spec: str, backends: list[str]) -> int:
    kind, _, seed = spec.partition(":")
    if kind not in KINDS or not seed.lstrip("-").isdigit():
        print(f"--reproduce wants KIND:SEED with KIND in {KINDS}", file=sys.stderr)
        return 2
    case = make_case(kind, int(seed))
    print(f"{kind} {seed}: {case.label}")
    print("feeds: " + ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in case.feeds.items()))
    status = 0
    for backend in backends:
        outcome = judge(make_case(kind, int(seed)), backend)
        print(f"[{backend}] {outcome.cls}: {outcome.error_type} {outcome.where} "
              f"{outcome.message} {outcome.detail}".rstrip())
        if outcome.cls == FOREIGN:
            try:
                run_spawnml(case.model, make_case(kind, int(seed)).feeds, backend)
            except Exception:  # noqa: BLE001 - the point is to print it
                traceback.print_exc()
        status |= outcome.fatal
    return int(status)


def _selftest(timeout: float) -> int:
    case = make_case("graph", 1)
    expected = {faults.raise_foreign: FOREIGN, faults.abort: CRASH, faults.sleep: HANG,
                faults.raise_spawnml_error: REFUSED_VALID, faults.off_by_one: MISMATCH,
                faults.write_feeds: MISMATCH}
    bad = 0
    with WorkerPool(timeout=timeout) as pool:
        for runner, cls in expected.items():
            (outcome,) = pool.run([Task(case, "cpu", runner)])
            ok = outcome.cls == cls
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {runner.__name__}: {outcome.cls} (want {cls})")
    return int(bad > 0)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    logging.disable(logging.WARNING)
    if args.reproduce:
        return _reproduce(args.reproduce, backends)
    if args.selftest:
        return _selftest(min(args.timeout, 5.0))
    report = Report(examples=args.examples)
    total = sum(
        (args.mutations + args.graphs) if b == "cpu"
        else min(args.mutations, args.other) + min(args.graphs, args.other) for b in backends)
    start = time.monotonic()
    done = 0
    with WorkerPool(workers=args.workers, timeout=args.timeout, memory_mb=args.memory_mb) as pool:
        for outcome in pool.run(_tasks(args, backends)):
            report.add(outcome)
            done += 1
            if outcome.fatal and args.verbose:
                print(f"  {outcome.cls} {outcome.backend} {outcome.kind}:{outcome.seed} "
                      f"{outcome.error_type} {outcome.where} {outcome.message[:120]}",
                      file=sys.stderr, flush=True)
            if done % 100 == 0 or done == total:
                print(f"[{done}/{total}] {time.monotonic() - start:.0f} s, "
                      f"{report.fatal} fatal", file=sys.stderr, flush=True)
    print(report.summary())
    print(f"\n{done} cases in {time.monotonic() - start:.0f} s, {pool.replaced} worker(s) replaced")
    if args.json:
        report.write_json(args.json)
    if args.save_failures:
        saved = report.save_examples(args.save_failures, [*FATAL, REFUSED_VALID])
        print(f"saved {len(saved)} case(s) under {args.save_failures}")
    return int(report.fatal > 0)


if __name__ == "__main__":
    sys.exit(main())
