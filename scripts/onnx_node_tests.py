#!/usr/bin/env python
"""Run the official ONNX node tests (every case shipped in the onnx wheel) through the
onnx.backend adapter over InferenceSession on each backend named, and write
docs/onnx-node-tests.md.

    .venv/bin/python scripts/onnx_node_tests.py --backend cpu,opencl,webgpu,webgl,wasm
        [--write] [--only Relu,Add] [--models cpu,opencl,webgpu,webgl,wasm [--reuse-models]]

``--models`` also runs the model cases of the wheel (the nine ``light`` zoo models, as
shipped and with random weights, against onnxruntime; ``simple``, ``pytorch-converted``,
``pytorch-operator`` against their data sets) on each backend named, and adds their counts
(tests/models/test_onnx_model_cases.py holds them); each backend's results are saved to
``build/onnx-model-tests.<backend>.json``, which ``--reuse-models`` reads instead of
running again.

The document records each backend's pass count, every case that does not pass on the
first backend with its reason (grouped by op), and per other backend the cases that pass
on the first but not there; its ``threshold`` line is what
spawnml-core/tests/graph/test_onnx_node_tests.py asserts per backend in CI (so a
regression fails). ``--write`` sets the thresholds to the measured pass counts.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import onnx

from spawnml.testing.onnx_session_tests import CaseResult, run_all

DOC = Path(__file__).resolve().parents[1] / "docs" / "onnx-node-tests.md"
BUILD = Path(__file__).resolve().parents[1] / "build"
# Cases whose expected outputs are random draws: no implementation can reproduce them.
RANDOM_OUTPUTS = ("test_bernoulli",)


def _status(r: CaseResult) -> str:
    return "excluded" if r.name.startswith(RANDOM_OUTPUTS) and r.status == "fail" else r.status


def _line(r: CaseResult) -> str:
    detail = r.detail.replace("|", "\\|").replace("\n", " ")[:240]
    return f"- `{r.name}` — {_status(r)}: {detail}"


def render(runs: dict[str, tuple[list[CaseResult], float]]) -> str:
    """The document: counts per backend, the first backend's failures by op, and per
    other backend what passes on the first but not there."""
    first = next(iter(runs))
    results, _ = runs[first]
    thresholds = " ".join(f"{b}={sum(r.status == 'pass' for r in rs)}"
                          for b, (rs, _) in runs.items())  # fmt: skip
    lines = [
        "# ONNX node tests through InferenceSession",
        "",
        f"The official node test cases of onnx {onnx.__version__} ({len(results)} cases), each run",
        "through `spawnml.onnx_backend` (an `onnx.backend.base.Backend` over `InferenceSession`)",
        "on each backend by `scripts/onnx_node_tests.py --backend "
        f"{','.join(runs)} --write`. CI runs the whole set on every backend",
        "(`spawnml-core/tests/graph/test_onnx_node_tests.py`): a count below its threshold fails.",
        "",
        f"<!-- threshold: {thresholds} -->",
        "| backend | pass | fail | unsupported | error | excluded "
        "| passing with a host fallback | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend, (rs, seconds) in runs.items():
        counts = Counter(_status(r) for r in rs)
        fallback = sum(1 for r in rs if r.status == "pass" and r.fallback)
        lines.append(f"| {backend} | **{counts['pass']}** | {counts['fail'] + counts['timeout']} | "
                     f"{counts['unsupported']} | {counts['error']} | {counts['excluded']} | "
                     f"{fallback} | {seconds:.0f} |")  # fmt: skip
    lines += [
        "",
        "Statuses: *fail* — wrong values or shapes; *unsupported* — an op, opset, attribute or",
        "element type spawnml does not implement (a SpawnMLError saying so); *error* — any",
        "other exception; *excluded* — expected outputs are random draws (Bernoulli), which no",
        "implementation reproduces. *Passing with a host fallback*: the case passed, but at",
        "least one of its nodes had no kernel on that backend and was computed by its numpy",
        "reference on the host (declared host-only ops — strings, sequences, ai.onnx.ml — are",
        "not counted here).",
        "",
        f"## Not passing on {first}",
        "",
    ]
    groups: dict[str, list] = defaultdict(list)
    for r in results:
        if r.status != "pass":
            groups[r.group].append(r)
    for group in sorted(groups):
        lines += [f"### {group} ({len(groups[group])})", ""]
        lines += [_line(r) for r in groups[group]]
        lines.append("")
    passing = {r.name for r in results if r.status == "pass"}
    for backend, (rs, _) in list(runs.items())[1:]:
        worse = [r for r in rs if r.status != "pass" and r.name in passing]
        lines += [f"## Passing on {first} but not on {backend} ({len(worse)})", ""]
        lines += [_line(r) for r in worse] or ["None."]
        lines.append("")
    return "\n".join(lines)


def model_results(backend: str, reuse: bool) -> list[CaseResult]:
    from spawnml.testing.onnx_model_tests import run_models

    saved = BUILD / f"onnx-model-tests.{backend}.json"
    if reuse and saved.exists():
        return [CaseResult(**r) for r in json.loads(saved.read_text())]
    results = run_models(backend)
    BUILD.mkdir(exist_ok=True)
    saved.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return results


def render_models(by_backend: dict[str, list[CaseResult]]) -> str:
    from spawnml.testing.onnx_model_tests import KINDS

    kinds = ["light", *KINDS]
    lines = [
        "## Model cases of the wheel, per backend",
        "",
        "`light`: the nine zoo models of `onnx/backend/test/data/light` (opset 9), each as",
        "shipped (placeholder weights) and with seeded random weights, against onnxruntime",
        "(rtol 1e-3, atol 1e-5); the others against their shipped data sets with each case's",
        "own rtol/atol. Run by `scripts/onnx_node_tests.py --models ...`.",
        "",
        "| backend | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for backend, results in by_backend.items():
        cells = []
        for kind in kinds:
            rs = [r for r in results if r.group == kind]
            cells.append(f"{sum(r.status == 'pass' for r in rs)}/{len(rs)}")
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    lines.append("")
    for backend, results in by_backend.items():
        bad = [r for r in results if r.status != "pass"]
        if not bad:
            continue
        lines += [f"### {backend}: not passing ({len(bad)})", ""]
        for r in bad:
            detail = r.detail.replace("|", "\\|").replace("\n", " ")[:240]
            lines.append(f"- `{r.name}` ({r.group}) — {r.status}: {detail}")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cpu", help="comma-separated backends")
    parser.add_argument("--only", help="comma-separated op types or case names")
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    parser.add_argument("--models", help="comma-separated backends to run the model cases on")
    parser.add_argument("--reuse-models", action="store_true",
                        help="read build/onnx-model-tests.<backend>.json instead of running")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # fallback summaries would drown the report
    only = set(args.only.split(",")) if args.only else None
    runs: dict[str, tuple[list[CaseResult], float]] = {}
    for backend in args.backend.split(","):
        start = time.perf_counter()
        results = list(run_all(backend, only))
        seconds = time.perf_counter() - start
        runs[backend] = (results, seconds)
        for r in results:
            if r.status in ("fail", "error", "timeout"):
                print(f"{r.status:8s} {r.name}: {r.detail[:200]}")
        print(f"{backend}: {dict(Counter(r.status for r in results))} in {seconds:.1f} s")
    models = {}
    for backend in (args.models.split(",") if args.models else []):
        models[backend] = model_results(backend, args.reuse_models)
        found = Counter(r.status for r in models[backend])
        print(f"{backend} model cases: {dict(found)}")
    if args.write:
        text = render(runs)
        if models:
            text += "\n" + render_models(models)
        DOC.write_text(text + "\n")
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
