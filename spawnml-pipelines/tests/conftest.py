"""Fixtures of the pipelines' tests: the backends to run on and small test images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spawnml_pipelines.device import Device
from spawnml_pipelines.testing import available_backends, backend_param, backend_params

# cpu (the reference executor) and one device backend by default;
# SPAWNML_PIPELINE_BACKENDS=all (or a list) widens it. Other backends run as slow tests.


@pytest.fixture(params=backend_params())
def device(request: pytest.FixtureRequest) -> Device:
    return Device(request.param)


@pytest.fixture(params=backend_params())
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=[backend_param(n) for n in available_backends()])
def any_device(request: pytest.FixtureRequest) -> Device:
    """Every registered backend (the pixel kernels are quick enough to run on all)."""
    return Device(request.param)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def photo_like(rng: np.random.Generator):
    """A factory of smooth-ish RGB uint8 test images (gradients plus noise), deterministic."""

    def make(h: int, w: int) -> np.ndarray:
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1),
                         128 + 100 * np.sin(x / 7.0) * np.cos(y / 5.0)], -1)
        return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)

    return make


@pytest.fixture(scope="session")
def small_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The generated models at small input sizes (same layouts), so tests run in seconds."""
    import onnx

    from spawnml.testing.models import generated_model, vision
    from spawnml_pipelines.depth_model import encoder_decoder
    from spawnml_pipelines.testing import with_input_size

    root = tmp_path_factory.mktemp("models")
    paths = {
        "classify": with_input_size(generated_model("squeezenet1_1"), (96, 96),
                                    root / "squeezenet96.onnx"),
        "upscale": with_input_size(generated_model("espcn_x3"), (48, 48), root / "espcn48.onnx"),
    }
    for task, model in [("style", vision.transformer_net(seed=5, size=64)),
                        ("depth", encoder_decoder("depth_small", 64, "depth")),
                        ("remove-bg", encoder_decoder("mask_small", 64, "mask"))]:
        paths[task] = root / f"{task}.onnx"
        onnx.save(model, str(paths[task]))
    return paths
