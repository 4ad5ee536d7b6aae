"""Real and full-size models: IS-Net on the real cat photo, the generated models at their
shipped sizes on every backend, and a 1000×700 tiled upscale. All slow.

IS-Net (1024×1024) is heavy on emulated devices: it runs on cpu by default, and on the
backends ``SPAWNML_HEAVY_BACKENDS`` names (or ``all``): PoCL takes ~3 minutes for it on 2
cores, lavapipe/llvmpipe/wasm longer. The full-size generated models run on cpu and opencl
(``SPAWNML_FULL_SIZE_BACKENDS`` widens it).
"""

from __future__ import annotations

import numpy as np
import pytest

from spawnml_pipelines import pipeline, testing
from spawnml_pipelines.classify import IMAGENET_MEAN, IMAGENET_STD
from spawnml_pipelines.image_io import load_image
from spawnml_pipelines.kernels import reference as ref
from spawnml_pipelines.testing import backend_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cat() -> np.ndarray:
    from spawnml_pipelines.samples import sample_image

    return load_image(sample_image("chelsea.png"))


@pytest.fixture(scope="module")
def isnet_reference(cat: np.ndarray) -> np.ndarray:
    from spawnml_pipelines.models import resolve_model

    return testing.remove_bg_mask(resolve_model("isnet"), cat, (1024, 1024), (128.0,) * 3,
                                  (256.0,) * 3, output="output")


@pytest.mark.parametrize("backend", backend_params("SPAWNML_HEAVY_BACKENDS", ("cpu",), "skip"))
def test_isnet_keeps_the_cat(backend: str, cat: np.ndarray, isnet_reference: np.ndarray
                             ) -> None:
    result = pipeline("remove-bg", "isnet", backend)(cat)
    assert result.image.shape == (300, 451, 4)
    # the mask against onnxruntime + numpy pre/post-processing (IS-Net's 100+ convs in f32)
    np.testing.assert_allclose(result.mask, isnet_reference, atol=2e-3)
    alpha = result.image[..., 3].astype(float) / 255
    face = alpha[120:220, 180:300]  # between the eyes, down to the nose
    assert face.mean() > 0.95 and face.min() > 0.8
    for corner in (alpha[0:30, 0:30], alpha[100:200, 425:451], alpha[260:300, 420:451]):
        assert corner.mean() < 0.05  # background: top-left, right edge, bottom-right
    np.testing.assert_array_equal(result.image[..., :3], cat)


# InstanceNormalization over 224×224 per channel is wrong on webgpu and webgl (max error
# 3.8 on unit-variance output; fine at 64×64 and on cpu/opencl/wasm): an ops/backend bug
# found by this test, reported with a run_node repro. Strict: the test fails once it is fixed.
_INORM_BUG = pytest.mark.xfail(strict=True, reason="InstanceNormalization over 50176 "
                               "elements is wrong on webgpu/webgl (ops bug, reported)")


def _full_size_params() -> list:
    """cpu and opencl by default (minutes on the emulated GL/Vulkan/Wasm devices, whose
    pipelines the small-model tests cover); SPAWNML_FULL_SIZE_BACKENDS=all for every one."""
    params = []
    for task in ("classify", "depth", "style"):
        for p in backend_params("SPAWNML_FULL_SIZE_BACKENDS", ("cpu", "opencl"), "skip"):
            name = p.values[0]
            marks = list(p.marks)
            if task == "style" and name in ("webgpu", "webgl"):
                marks.append(_INORM_BUG)
            params.append(pytest.param(name, task, marks=marks, id=f"{task}-{name}"))
    return params


@pytest.mark.parametrize("backend, task", _full_size_params())
def test_full_size_models(backend: str, task: str, cat: np.ndarray) -> None:
    """The generated models at their shipped 224×224 sizes, from Python, on every backend."""
    from spawnml_pipelines.models import resolve_model

    name = {"classify": "squeezenet1_1", "depth": "depth_tiny", "style": "transformer_net"}[task]
    path = resolve_model(name)
    pipe = pipeline(task, name, backend)
    if task == "classify":
        probs = testing.classify(path, cat, (224, 224), 256, IMAGENET_MEAN, IMAGENET_STD)
        got = pipe(cat, top_k=5)
        np.testing.assert_allclose([p.score for p in got], probs[[p.index for p in got]],
                                   rtol=1e-3, atol=1e-6)
        assert got[0].index == int(np.argmax(probs))
    elif task == "depth":
        want = testing.depth(path, cat, (224, 224), IMAGENET_MEAN, IMAGENET_STD)
        got = pipe(cat).depth
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(want.max()))
    else:
        got = pipe(cat)
        diff = np.abs(got.astype(int) - testing.style(path, cat, (224, 224)).astype(int))
        assert diff.max() <= 2 and (diff > 0).mean() < 0.02


def test_upscale_1000x700_without_seams() -> None:
    """ESPCN ×3 on a 1000×700 photo-like image: 4×5 tiles of 224, full size 3000×2100."""
    from spawnml_pipelines.models import resolve_model

    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:700, 0:1000]
    img = np.stack([x * 0.25, y * 0.36, 128 + 90 * np.sin(x / 23) * np.cos(y / 17)], -1)
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    up = pipeline("upscale", "espcn_x3", "cpu", overlap=16)
    luma = up.device.get(up.upscale_luma(img))
    assert luma.shape == (2100, 3000)
    whole = testing.upscale_whole_luma(resolve_model("espcn_x3"), img)
    # numerically seamless: equal to the untiled result everywhere, and no step along the
    # tile boundaries beyond what the untiled result has there
    np.testing.assert_allclose(luma, whole, rtol=0, atol=5e-5)
    bounds = [int(o) * 3 for o in up_grid_origins(1000, 224, 208)[1:]]
    step = np.abs(np.diff(luma, axis=1))[:, [b - 1 for b in bounds]]
    step_whole = np.abs(np.diff(whole, axis=1))[:, [b - 1 for b in bounds]]
    assert np.abs(step - step_whole).max() < 1e-4
    rgb = up(img)
    assert rgb.shape == (2100, 3000, 3)
    diff = np.abs(rgb.astype(int) - ref.merge_luma_chroma(whole, img).astype(int))
    assert diff.max() <= 1


def up_grid_origins(n: int, tile: int, stride: int) -> np.ndarray:
    from spawnml_pipelines.kernels.tiling import axis_origins

    return axis_origins(n, tile, stride)
