"""The driver's bookkeeping in ``run_batch`` when Ray loses work, without a cluster: passes
that fail part-way are run again on what is left, and work lost every time is recorded."""

from __future__ import annotations

import pytest

from spawnml_ray import job, read_results, run_batch

ray = pytest.importorskip("ray")


def _fake_run(monkeypatch, passes) -> list[list[str]]:
    """Replace the cluster: each pass gets the paths it was asked for and runs ``passes``'
    next behaviour on them. Returns the paths each pass was asked for."""
    asked: list[list[str]] = []
    behaviours = iter(passes)

    def fake_passes(task, shipped, backend, items, *rest):
        paths = [it.path for it in items]
        asked.append(paths)
        yield from next(behaviours)(paths)

    monkeypatch.setattr(job, "_passes", fake_passes)
    monkeypatch.setattr(job, "_ship", lambda task, model, via: None)
    monkeypatch.setattr(job, "connect", lambda address, num_cpus=None: False)
    return asked


def _ok(paths):
    return {"path": paths, "label": ["x"] * len(paths), "backend": ["cpu"] * len(paths),
            "error": [""] * len(paths)}


def _fails_after(n):
    def run(paths):
        yield _ok(paths[:n])
        raise ray.exceptions.RayError("node lost")
    return run


def _all_ok(paths):
    yield _ok(paths)


def test_a_pass_that_fails_part_way_runs_again_on_what_is_left(tmp_path, monkeypatch,
                                                               make_images) -> None:
    paths = make_images(tmp_path / "in", 6, seed=1, nested=False)
    asked = _fake_run(monkeypatch, [_fails_after(2), _all_ok])
    report = run_batch("classify", tmp_path / "in", tmp_path / "out")
    assert (report.done, report.errors) == (6, 0)
    assert len(asked[0]) == 6 and sorted(asked[1]) == sorted(asked[0][2:])
    rows = read_results(tmp_path / "out").to_pylist()
    assert sorted(r["path"] for r in rows) == sorted(str(p.resolve()) for p in paths)


def test_work_lost_on_every_pass_is_recorded_as_errors(tmp_path, monkeypatch,
                                                       make_images) -> None:
    make_images(tmp_path / "in", 4, seed=2, nested=False)
    asked = _fake_run(monkeypatch, [_fails_after(1), _fails_after(0), _fails_after(0)])
    report = run_batch("classify", tmp_path / "in", tmp_path / "out")
    assert len(asked) == 3 and (report.done, report.errors) == (4, 3)
    rows = read_results(tmp_path / "out").to_pylist()
    lost = [r for r in rows if r["error"]]
    assert len(lost) == 3 and all(r["error"] == "WorkerLost: node lost" for r in lost)
    again = run_batch("classify", tmp_path / "in", tmp_path / "out")  # all have a row now
    assert (again.skipped, again.done) == (4, 0)
