"""``run_batch`` / ``spawnml batch`` on a local Ray cluster: the same answers as one process,
every input accounted for when images are corrupt or workers die, and resumable output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from spawnml_ray import read_results, run_batch
from spawnml_ray.predictors import KILL_ENV, POISON_ENV

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _rows(output: Path) -> dict[str, dict]:
    table = read_results(output).to_pylist()
    return {row["path"]: row for row in table}


def _assert_classify_matches(rows: dict[str, dict], reference: dict) -> None:
    assert set(rows) == set(reference)
    for path, (label, score, index, top_k) in reference.items():
        row = rows[path]
        assert row["error"] == "", (path, row["error"])
        assert (row["label"], row["score"], row["class_index"], row["top_k"]) == \
            (label, score, index, top_k), path


def test_classify_200_images_with_two_actors_equals_one_process(
        images_200, classify_reference, tmp_path) -> None:
    folder, _ = images_200
    report = run_batch("classify", folder, tmp_path, actors=2, backend="cpu", batch_size=16)
    assert (report.total, report.done, report.errors, report.skipped) == (200, 200, 0, 0)
    assert report.backends == ["cpu"]
    rows = _rows(tmp_path)
    _assert_classify_matches(rows, classify_reference)
    assert len({row["worker"] for row in rows.values()}) == 2  # both actors did work
    import pyarrow.parquet as pq

    parts = list((tmp_path / "results").glob("part-*.parquet"))
    assert len(parts) > 1  # written block by block as results stream in, not at the end
    assert sum(pq.read_metadata(p).num_rows for p in parts) == 200
    assert not list((tmp_path / "results").glob(".part-*"))  # no temporary file left


def test_a_killed_actor_loses_no_result(images_200, classify_reference, tmp_path,
                                        monkeypatch) -> None:
    folder, _ = images_200
    marker = tmp_path / "killed"
    monkeypatch.setenv(KILL_ENV, f"{marker}:24")
    report = run_batch("classify", folder, tmp_path / "out", actors=2, backend="cpu",
                       batch_size=8)
    assert marker.is_file(), "the test hook did not kill an actor"
    assert report.done == 200 and report.errors == 0
    rows = _rows(tmp_path / "out")
    _assert_classify_matches(rows, classify_reference)
    workers = {row["worker"] for row in rows.values()}
    assert len(workers) >= 2


def test_corrupt_images_get_an_error_row_and_reruns_resume(tmp_path, make_images) -> None:
    inputs = tmp_path / "in"
    good = make_images(inputs, 6, seed=3, nested=False)
    (inputs / "truncated.png").write_bytes(good[0].read_bytes()[:100])
    (inputs / "not-an-image.jpg").write_bytes(b"hello")
    out = tmp_path / "out"
    first = run_batch("classify", inputs, out, actors=2, backend="cpu", batch_size=3)
    assert (first.total, first.done, first.errors) == (8, 8, 2)
    rows = _rows(out)
    bad = {Path(p).name: r["error"] for p, r in rows.items() if r["error"]}
    assert set(bad) == {"truncated.png", "not-an-image.jpg"}
    assert all(e.startswith("InvalidInputError: cannot read image") for e in bad.values())
    assert all(rows[str(p.resolve())]["label"] for p in good)

    again = run_batch("classify", inputs, out, actors=2, backend="cpu")
    assert (again.skipped, again.done) == (8, 0)  # nothing to do, no cluster work

    make_images(inputs / "later", 2, seed=4, nested=False)
    (inputs / "not-an-image.jpg").unlink()
    (inputs / "truncated.png").write_bytes(good[1].read_bytes())  # fixed in place
    more = run_batch("classify", inputs, out, actors=1, backend="cpu", retry_errors=True)
    assert (more.total, more.skipped, more.done, more.errors) == (9, 6, 3, 0)
    rows = _rows(out)
    assert rows[str((inputs / "truncated.png").resolve())]["error"] == ""
    assert len(rows) == 10  # the deleted image keeps its old row; the newest row per path


def test_an_image_that_kills_every_worker_is_recorded(tmp_path, monkeypatch, make_images) -> None:
    inputs = tmp_path / "in"
    make_images(inputs, 5, seed=5, nested=False)
    make_images(inputs / "poison", 1, seed=6, nested=False)
    monkeypatch.setenv(POISON_ENV, "/poison/")
    report = run_batch("classify", inputs, tmp_path / "out", actors=2, backend="cpu",
                       batch_size=2, task_retries=2)
    assert (report.done, report.errors) == (6, 1)
    rows = _rows(tmp_path / "out")
    (poisoned,) = [r for p, r in rows.items() if "/poison/" in p]
    assert poisoned["error"] == "WorkerDied: 2 workers died processing this image"
    assert all(r["label"] for p, r in rows.items() if "/poison/" not in p)


@pytest.mark.slow
def test_remove_bg_20_images_equals_one_process(tmp_path, make_images) -> None:
    from spawnml_pipelines import pipeline
    from spawnml_pipelines.image_io import load_image

    inputs = tmp_path / "in"
    paths = make_images(inputs, 20, seed=9)
    report = run_batch("remove-bg", inputs, tmp_path / "out", actors=2, backend="cpu",
                       batch_size=2)
    assert (report.done, report.errors) == (20, 0)
    rows = _rows(tmp_path / "out")
    pipe = pipeline("remove-bg", backend="cpu", progress=False)
    for path in paths:
        row = rows[str(path.resolve())]
        want = pipe(path)
        cutout = load_image_rgba(tmp_path / "out" / row["output"])
        mask = load_image(tmp_path / "out" / row["output_mask"])[..., 0]
        np.testing.assert_array_equal(cutout, want.image)
        np.testing.assert_array_equal(
            mask, (np.clip(want.mask, 0, 1) * 255).round().astype(np.uint8))
    assert (tmp_path / "out" / "group1" / "img0001.png").is_file()  # mirrors the input tree


def load_image_rgba(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im)


def test_inputs_from_a_csv_list(images_200, classify_reference, tmp_path) -> None:
    folder, paths = images_200
    chosen = paths[:10]
    listing = folder / f"list-{os.getpid()}.csv"
    listing.write_text("path\n" + "\n".join(str(p.relative_to(folder)) for p in chosen))
    try:
        report = run_batch("classify", listing, tmp_path, actors=1, backend="cpu")
    finally:
        listing.unlink()
    assert report.done == 10
    rows = _rows(tmp_path)
    _assert_classify_matches(rows, {str(p.resolve()): classify_reference[str(p.resolve())]
                                    for p in chosen})
    top = json.loads(rows[str(chosen[0].resolve())]["top_k"])
    assert len(top) == 5 and top[0][0] == rows[str(chosen[0].resolve())]["label"]
