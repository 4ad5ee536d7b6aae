"""Fixtures of spawnml-ray's tests: one local Ray cluster of 2 CPUs (loopback only) for the
whole run, and folders of generated images of many sizes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def write_images(folder: Path, n: int, seed: int, nested: bool = True) -> list[Path]:
    """``n`` deterministic PNG/JPEG images of sizes 24-200 px (some in a subfolder)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(24, 200, 2))
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([x * 255 / w, y * 255 / h, 128 + 100 * np.sin(x / (3 + i % 7))], -1)
        img = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
        sub = folder / f"group{i % 3}" if nested and i % 2 else folder
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"img{i:04d}.{'jpg' if i % 5 == 0 else 'png'}"
        Image.fromarray(img).save(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="session")
def make_images():
    """:func:`write_images`, for tests."""
    return write_images


@pytest.fixture(scope="session")
def images_200(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("images200")
    return folder, write_images(folder, 200, seed=7)


REFERENCE = """
import json, sys
from spawnml_pipelines import pipeline
pipe = pipeline("classify", backend="cpu", progress=False)
found = {}
for path in json.load(sys.stdin):
    preds = pipe(path)
    found[path] = (preds[0].label, preds[0].score, preds[0].index,
                   json.dumps([[p.label, p.score, p.index] for p in preds]))
json.dump(found, sys.stdout)
"""


@pytest.fixture(scope="session")
def classify_reference(images_200) -> dict[str, tuple[str, float, int, str]]:
    """The single-process answer for every image: (label, score, index, top_k JSON), from
    one process with one BLAS thread, as Ray runs a 1-CPU actor (OMP_NUM_THREADS=1;
    BLAS results move in the last bit with the thread count)."""
    import json
    import os
    import subprocess
    import sys

    paths = [str(p.resolve()) for p in images_200[1]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", REFERENCE], input=json.dumps(paths),
                          capture_output=True, text=True, env=env, check=True)
    return {path: tuple(row) for path, row in json.loads(done.stdout).items()}
