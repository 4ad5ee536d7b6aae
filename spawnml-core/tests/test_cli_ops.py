"""`spawnml ops`: the operator table, and docs/operators.md kept in step with it."""

from __future__ import annotations

from pathlib import Path

from spawnml.cli import main
from spawnml.cli_ops import render_markdown, support_rows

BUILTIN = ["cpu", "cuda", "opencl", "wasm", "webgl", "webgpu"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "operators.md"


def test_operators_doc_is_current():
    expected = render_markdown(support_rows(BUILTIN), BUILTIN)
    assert DOC.read_text() == expected, (
        "docs/operators.md is stale: regenerate it with "
        "`spawnml ops --format md > docs/operators.md`"
    )


def test_ops_table_declares_at_least_160_op_types_and_host_ops(capsys):
    assert main(["ops", "--backend", "cpu", "--format", "json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 160
    by_op = {r["op_type"]: r for r in rows}
    assert by_op["Relu"]["cpu"].endswith("portable") or by_op["Relu"]["cpu"] == "portable kernel"
    assert by_op["NonZero"]["cpu"] == "host"
    assert by_op["Conv"]["cpu"] == "cpu kernel + portable"
