"""Real pretrained models from pip/npm packages, on every backend, against onnxruntime.

One test per (model, backend). A model runs on its fixed seeded inputs
(``FETCHED[name].inputs()``) and passes when every output is within the model's stated
tolerance of onnxruntime's: ``|got - ref| <= tolerance · max(1, |ref|)`` (1e-4 for float32
models). Models are skipped until ``scripts/fetch_models.py`` has fetched them into the cache.

Where it runs: every model on cpu; the light models on opencl, webgpu, webgl and wasm too.
A heavy model (``FetchedModel.heavy``: minutes on the emulated devices of a 2-core machine)
runs off cpu only on the backends ``SPAWNML_HEAVY_BACKENDS`` names (or ``all``).
A pair that cannot pass today is in ``KNOWN`` with a fragment of spawnml's error or of the
mismatch report: the test xfails with that text while the failure is that one, fails when it
fails differently, and fails when it passes (remove the entry then).
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from spawnml import InferenceSession, get_available_backends
from spawnml.testing.models import mismatches
from spawnml.testing.models.fetched import FETCHED, fetched_model

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow  # real models: seconds each, minutes for the heavy ones

BACKENDS = ("cpu", "opencl", "webgpu", "webgl", "wasm")
HEAVY_ENV = "SPAWNML_HEAVY_BACKENDS"
TOO_SLOW = {
    "isnet_fp16": "float16 IS-Net runs > 15 min on the float16 portable kernels; the "
    "float32-widened `isnet` is the acceptance model",
}
# (model, backend): a fragment of the error text or mismatch report seen today.
KNOWN: dict[tuple[str, str], str] = {}


def _heavy_backends() -> set[str]:
    wanted = os.environ.get(HEAVY_ENV, "")
    return set(BACKENDS) if wanted == "all" else set(filter(None, wanted.split(",")))


def _params():
    heavy = _heavy_backends()
    for name, spec in FETCHED.items():
        for backend in BACKENDS:
            marks = []
            if name in TOO_SLOW:
                marks.append(pytest.mark.skip(reason=TOO_SLOW[name]))
            elif spec.heavy and backend != "cpu" and backend not in heavy:
                marks.append(pytest.mark.skip(
                    reason=f"{name} takes minutes on emulated {backend}: set "
                    f"{HEAVY_ENV}={backend} (or all) to run it"))  # fmt: skip
            yield pytest.param(name, backend, marks=marks, id=f"{name}-{backend}")


def _path(name: str) -> str:
    path = fetched_model(name)
    if path is None:
        pytest.skip(f"{name} not fetched: run scripts/fetch_models.py")
    return str(path)


@functools.cache
def _reference(name: str) -> tuple[list[str], list[np.ndarray]]:
    session = ort.InferenceSession(_path(name), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return names, session.run(None, FETCHED[name].inputs())


def _problems(name: str, backend: str) -> list[str]:
    """What differs from onnxruntime (empty: every output within tolerance)."""
    names, expected = _reference(name)
    with InferenceSession(_path(name), backends=[backend]) as session:
        got = session.run(None, FETCHED[name].inputs())
    return mismatches(got, expected, names, rel=FETCHED[name].tolerance)


@pytest.mark.parametrize(("name", "backend"), list(_params()))
def test_real_model_matches_onnxruntime(name: str, backend: str) -> None:
    if backend not in get_available_backends():
        pytest.skip(f"backend {backend} is not available here")
    _path(name)
    known = KNOWN.get((name, backend))
    try:
        problems = _problems(name, backend)
    except Exception as exc:
        if known and known in str(exc):
            pytest.xfail(f"known: {known}")
        raise
    if known:
        report = "; ".join(problems)
        if problems and known in report:
            pytest.xfail(f"known: {known}")
        pytest.fail(f"KNOWN says {known!r} but the run gave {report or 'a pass'}: update KNOWN")
    assert not problems


def test_every_fetched_model_declares_its_inputs():
    """Each model's feeds name exactly the graph's inputs (initializers aside), with the
    declared element types and fixed dimensions (Paddle exports write -1 for free ones)."""
    import onnx

    for name, spec in FETCHED.items():
        path = fetched_model(name)
        if path is None:
            continue
        graph = onnx.load(str(path), load_external_data=False).graph
        weights = {t.name for t in graph.initializer}
        declared = {i.name: i.type.tensor_type for i in graph.input if i.name not in weights}
        assert set(declared) == set(spec.feeds), name
        for key, array in spec.inputs().items():
            ttype = declared[key]
            assert onnx.helper.tensor_dtype_to_np_dtype(ttype.elem_type) == array.dtype, key
            dims = [d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim]
            assert len(dims) == array.ndim, (name, key, dims)
            assert all(d in (None, -1, n) for d, n in zip(dims, array.shape)), (name, key, dims)


def test_the_catalog_lists_every_fetched_model():
    from spawnml.model_catalog import catalog

    assert set(FETCHED) <= set(catalog())
