#!/usr/bin/env python
"""Run the official ONNX node tests (every case shipped in the onnx wheel) through the
onnx.backend adapter over InferenceSession and write docs/onnx-node-tests.md.

    .venv/bin/python scripts/onnx_node_tests.py --backend cpu [--write] [--only Relu,Add]

The document records the pass count and every case that does not pass, with its reason,
grouped by op; its ``threshold`` line is what tests/graph/test_onnx_node_tests.py asserts
(so a regression fails CI). ``--write`` sets the threshold to the measured pass count.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import onnx

from spawnml.testing.onnx_session_tests import run_all

DOC = Path(__file__).resolve().parents[1] / "docs" / "onnx-node-tests.md"
# Cases whose expected outputs are random draws: no implementation can reproduce them.
RANDOM_OUTPUTS = ("test_bernoulli",)


def render(backend: str, results: list, seconds: float) -> str:
    counts = Counter(r.status for r in results)
    passed = counts["pass"]
    lines = [
        "# ONNX node tests through InferenceSession",
        "",
        f"The official node test cases of onnx {onnx.__version__} ({len(results)} cases), each run",
        "through `spawnml.onnx_backend` (an `onnx.backend.base.Backend` over `InferenceSession`)",
        f"on the `{backend}` backend by `scripts/onnx_node_tests.py` ({seconds:.0f} s).",
        "",
        f"<!-- threshold: {backend}={passed} -->",
        f"**{passed} of {len(results)} pass** on {backend}. "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()) if k != "pass"),
        "",
        "Statuses: *fail* — wrong values or shapes; *unsupported* — an op, opset, attribute or",
        "element type spawnml does not implement (a SpawnMLError saying so); *error* — any",
        "other exception; *excluded* — expected outputs are random draws (Bernoulli), which no",
        "implementation reproduces.",
        "",
    ]
    groups: dict[str, list] = defaultdict(list)
    for r in results:
        if r.status != "pass":
            groups[r.group].append(r)
    for group in sorted(groups):
        items = groups[group]
        lines.append(f"## {group} ({len(items)})")
        lines.append("")
        for r in items:
            status = (
                "excluded" if r.name.startswith(RANDOM_OUTPUTS) and r.status == "fail" else r.status
            )
            detail = r.detail.replace("|", "\\|").replace("\n", " ")[:240]
            lines.append(f"- `{r.name}` — {status}: {detail}")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--only", help="comma-separated op types or case names")
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # fallback summaries would drown the report
    only = set(args.only.split(",")) if args.only else None
    start = time.perf_counter()
    results = list(run_all(args.backend, only))
    seconds = time.perf_counter() - start
    counts = Counter(r.status for r in results)
    for r in results:
        if r.status in ("fail", "error", "timeout"):
            print(f"{r.status:8s} {r.name}: {r.detail[:200]}")
    print(f"{args.backend}: {dict(counts)} in {seconds:.1f} s")
    if args.write:
        DOC.write_text(render(args.backend, results, seconds) + "\n")
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
