"""The fuzzers of ``spawnml.testing.fuzz`` (issue #20): their own machinery, then a short
fixed-seed budget on the cpu backend.

The machinery tests must always pass: deterministic mutations and graphs, generated graphs
that onnx's checker accepts, comparisons, and the classification of deliberate faults
(foreign exception, abort, hang, refusal, wrong values, written feeds) in worker processes.
``scripts/fuzz.py`` runs the long budgets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime")

from spawnml.testing.fuzz import faults
from spawnml.testing.fuzz.cases import case_seed, make_case, save_case
from spawnml.testing.fuzz.graphs import generate
from spawnml.testing.fuzz.mutate import STRUCTURAL, mutate
from spawnml.testing.fuzz.oracle import (
    CRASH,
    FOREIGN,
    HANG,
    MISMATCH,
    OK,
    REFUSED_VALID,
    Outcome,
    compare,
    innermost_frame,
    judge,
)
from spawnml.testing.fuzz.report import Report, reproduce
from spawnml.testing.fuzz.seeds import SEEDS, seed_model
from spawnml.testing.fuzz.workers import Task, WorkerPool, fault_frame

ROOT = Path(__file__).resolve().parents[1]


# -- inputs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_models_are_valid(name):
    onnx.checker.check_model(seed_model(name), full_check=True)


def test_mutations_are_deterministic_per_seed():
    for seed in range(60):
        a, b = mutate(seed), mutate(seed)
        assert (a.model, a.steps, a.seed_name) == (b.model, b.steps, b.seed_name)
        ca, cb = make_case("mutation", seed), make_case("mutation", seed)
        assert ca.model == cb.model and ca.feeds.keys() == cb.feeds.keys()
        assert all(np.array_equal(ca.feeds[k], cb.feeds[k]) for k in ca.feeds)
    assert len({mutate(seed).model for seed in range(60)}) > 50


def test_mutations_cover_every_kind():
    kinds = Counter(step.split(":")[0] for seed in range(600) for step in mutate(seed).steps)
    assert kinds["bytes"] > 50
    assert len(kinds) == len(STRUCTURAL) + 1, kinds  # every structural kind, and bytes


def test_generated_graphs_are_valid_and_deterministic():
    dtypes, features = Counter(), Counter()
    for seed in range(150):
        g = generate(seed)
        assert g.model == generate(seed).model
        model = onnx.ModelProto.FromString(g.model)
        onnx.checker.check_model(model, full_check=True)
        assert 1 <= len(model.graph.node) <= 6
        inputs = {vi.name: vi for vi in model.graph.input}
        assert inputs.keys() == g.feeds.keys()
        for name, value in g.feeds.items():
            dims = [d.dim_value for d in inputs[name].type.tensor_type.shape.dim]
            assert list(value.shape) == dims
            dtypes[value.dtype.name] += 1
            features["rank 0"] += value.ndim == 0
            features["size 0"] += value.size == 0
            features["non-finite"] += value.dtype.kind == "f" and not np.isfinite(value).all()
    assert dtypes["float32"] and dtypes["int64"] and dtypes["float16"], dtypes
    assert all(features.values()) and len(features) == 3, features


def test_saved_case_holds_the_model_and_feeds(tmp_path):
    case = make_case("graph", 7)
    path = save_case(case, tmp_path)
    meta = json.loads(path.with_suffix(".json").read_text())
    feeds = np.load(path.with_suffix(".npz"))
    assert path.read_bytes() == case.model and meta["seed"] == 7
    for i, name in enumerate(meta["feeds"]):
        assert np.array_equal(feeds[f"arr_{i}"], case.feeds[name])
    assert reproduce("graph", 7).model == case.model


# -- judging ----------------------------------------------------------------------------------
def test_compare_tolerances_nan_and_dtypes():
    e = np.array([1.0, np.nan, np.inf, 0.0], np.float32)
    assert compare(e, e.copy()) is None
    assert compare(e, e + np.float32(1e-5) * np.array([1, 0, 0, 1], np.float32)) is None
    assert "NaN" in compare(e, np.array([1.0, 0.0, np.inf, 0.0], np.float32))
    assert "inf" in compare(e, np.array([1.0, np.nan, -np.inf, 0.0], np.float32))
    assert "differ" in compare(e, np.array([1.01, np.nan, np.inf, 0.0], np.float32))
    assert "dtype" in compare(e, e.astype(np.float64))
    assert "shape" in compare(e, e[:3])
    assert "differ" in compare(np.arange(3), np.array([0, 1, 3]))


def test_innermost_frame_names_the_spawnml_file():
    namespace: dict = {}
    exec(compile("def boom():\n    raise KeyError('x')\n", "/x/spawnml_ops/fake.py", "exec"),
         namespace)
    with pytest.raises(KeyError) as info:
        namespace["boom"]()
    assert innermost_frame(info.value) == "spawnml_ops/fake.py:2"


def test_fault_frame_reads_the_case_thread_of_a_dump():
    dump = (
        "Fatal Python error: Aborted\n\n"
        "Thread 0x0001 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 327 in wait\n\n'
        "Current thread 0x0002 (most recent call first):\n"
        '  File "/r/numpy/core/x.py", line 9 in f\n'
        '  File "/r/src/spawnml_backend_cpu/run.py", line 42 in launch\n'
        '  File "/r/src/spawnml/testing/fuzz/workers.py", line 99 in worker_main\n')
    assert fault_frame(dump) == "spawnml_backend_cpu/run.py:42"


def test_judge_classifies_wrong_values_and_written_feeds_as_mismatch():
    case = make_case("graph", 1)
    wrong = judge(case, "cpu", faults.off_by_one)
    assert wrong.cls == MISMATCH and wrong.where in case.ops  # the first divergent node
    assert "first divergent node" in wrong.detail
    written = judge(make_case("graph", 1), "cpu", faults.write_feeds)
    assert (written.cls, written.error_type) == (MISMATCH, "feeds modified")
    assert judge(make_case("graph", 1), "cpu", faults.raise_spawnml_error).cls == REFUSED_VALID


def test_workers_classify_foreign_crash_and_hang_and_carry_on():
    case = make_case("graph", 1)
    tasks = [Task(case, "cpu", faults.raise_foreign), Task(case, "cpu", faults.abort),
             Task(case, "cpu", faults.sleep), Task(case, "cpu", faults.raise_spawnml_error)]
    with WorkerPool(timeout=3.0) as pool:
        outcomes = list(pool.run(tasks))
        replaced = pool.replaced
    assert [o.cls for o in outcomes] == [FOREIGN, CRASH, HANG, REFUSED_VALID]
    foreign, crash, hang, _ = outcomes
    assert foreign.error_type == "KeyError" and "faults.py" in foreign.where
    assert crash.error_type == "SIGABRT" and "faults.py" in crash.where
    assert hang.stage == "spawnml" and "faults.py" in hang.where
    assert replaced == 2


def test_report_groups_outcomes_and_keeps_examples(tmp_path):
    report = Report(examples=2)
    for seed in range(3):
        report.add(Outcome("graph", seed, "cpu", FOREIGN, "KeyError", "m", "spawnml/a.py:1"))
    report.add(Outcome("graph", 9, "cpu", OK))
    report.add(Outcome("mutation", 4, "wasm", REFUSED_VALID, "InvalidModelError", "r", "b.py:2"))
    data = report.to_dict()
    assert data["counts"] == {"cpu": {"ok": 1, "foreign": 3}, "wasm": {"refused-valid": 1}}
    assert data["fatal"] == 3
    first = data["groups"][0]
    assert (first["class"], first["count"], len(first["examples"])) == (FOREIGN, 3, 2)
    assert "--reproduce graph:0 --backends cpu" in report.summary()
    saved = report.save_examples(tmp_path, [FOREIGN])
    assert [p.name for p in saved] == ["foreign-cpu-graph-0.onnx", "foreign-cpu-graph-1.onnx"]


def test_cli_runs_a_tiny_budget(tmp_path):
    out = tmp_path / "fuzz.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--mutations", "8", "--graphs", "4",
         "--seed", "3", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(out.read_text())
    assert sum(data["counts"]["cpu"].values()) == 12
    assert proc.returncode == int(data["fatal"] > 0)


# -- the budget -------------------------------------------------------------------------------
BUDGET = {"cpu": (2000, 500)}  # (mutations, graphs); every other available backend: OTHER
OTHER = (100, 100)


def test_fixed_seed_budget_finds_no_bug():
    """The CI budget (~1 min on 2 cores): no crash, hang, foreign exception or mismatch
    against both oracles, on cpu and every other available backend. The long budget is
    ``scripts/fuzz.py`` (10,000 mutations and 2,000 graphs on cpu, 300 each elsewhere)."""
    import spawnml

    backends = [b for b in ("cpu", "opencl", "webgpu", "webgl", "wasm")
                if b in spawnml.get_available_backends()]
    tasks = [Task(make_case(kind, case_seed(20, i)), backend)
             for backend in backends
             for kind, n in zip(("mutation", "graph"), BUDGET.get(backend, OTHER))
             for i in range(n)]
    with WorkerPool(timeout=20.0) as pool:
        report = Report().extend(pool.run(tasks))
    assert sum(sum(c.values()) for c in report.counts.values()) == len(tasks)
    assert report.fatal == 0, report.summary()
