"""Each pipeline against onnxruntime plus the numpy reference of its pre/post-processing.

Models are the generated ones at small input sizes (same layouts and weights scheme), so
these run in seconds on cpu and on a device backend. Tolerances: float outputs compare to
1e-4 relative (f32 kernels vs float64 numpy, and model differences of ~1e-6); uint8 images
may differ by one level where a value lies within rounding of .5, on at most 1% of values.
"""

from __future__ import annotations

import numpy as np
import pytest

from spawnml_pipelines import imageops, pipeline, testing
from spawnml_pipelines.classify import IMAGENET_MEAN, IMAGENET_STD
from spawnml_pipelines.device import Device
from spawnml_pipelines.kernels import reference as ref


def assert_u8_close(got: np.ndarray, want: np.ndarray, frac: float = 0.01) -> None:
    assert got.shape == want.shape and got.dtype == np.uint8, (got.shape, want.shape)
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1, f"max difference {diff.max()}"
    assert (diff > 0).mean() <= frac, f"{(diff > 0).mean():.4f} of values off by one"


def test_classify(device: Device, small_models, photo_like) -> None:
    img = photo_like(70, 90)
    labels = [f"label {i}" for i in range(1000)]
    clf = pipeline("classify", small_models["classify"], device.name, labels=labels)
    preds = clf(img, top_k=5)
    want = testing.classify(small_models["classify"], img, (96, 96), round(96 * 256 / 224),
                            IMAGENET_MEAN, IMAGENET_STD)
    assert [p.index for p in preds] == list(np.argsort(-want, kind="stable")[:5])
    np.testing.assert_allclose([p.score for p in preds], want[[p.index for p in preds]],
                               rtol=1e-4, atol=1e-6)
    assert preds[0].label == f"label {preds[0].index}"
    assert preds[0].score >= preds[-1].score


@pytest.mark.parametrize("task", ["classify", "style", "remove-bg"])
def test_one_pipeline_serves_many_images(device: Device, small_models, photo_like,
                                         task: str) -> None:
    """A pipeline is called again and again (batch jobs): from the third call on, its model
    runs from a recorded plan fed with tensors closed after each call; every result equals
    what a fresh pipeline gives for that image."""
    images = [photo_like(60 + 7 * i, 80 - 5 * i) for i in range(3)]
    many = pipeline(task, small_models[task], device.name)
    got = [many(img) for img in [*images, images[0], images[1]]]
    wants = [pipeline(task, small_models[task], device.name)(img) for img in images]
    for result, want in zip(got, [*wants, wants[0], wants[1]]):
        if task == "classify":
            assert [(p.index, p.score) for p in result] == [(p.index, p.score) for p in want]
        elif task == "remove-bg":
            np.testing.assert_array_equal(result.mask, want.mask)
        else:
            np.testing.assert_array_equal(result, want)


def test_classify_labels_from_file_and_errors(small_models, photo_like, tmp_path) -> None:
    path = tmp_path / "labels.txt"
    path.write_text("\n".join(f"thing {i}" for i in range(1000)))
    clf = pipeline("image-classification", small_models["classify"], "cpu", labels=path)
    assert clf(photo_like(30, 40), top_k=1)[0].label.startswith("thing ")
    clf.labels = ["too", "few"]
    with pytest.raises(ValueError, match="2 labels for a model with 1000 classes"):
        clf(photo_like(30, 40))


def test_depth_and_colormap_switch(device: Device, small_models, photo_like) -> None:
    img = photo_like(45, 80)  # not square: the map must come back at 45×80
    est = pipeline("depth", small_models["depth"], device.name)
    result = est(img)
    want = testing.depth(small_models["depth"], img, (64, 64), IMAGENET_MEAN, IMAGENET_STD)
    depth = result.depth
    assert depth.shape == (45, 80)
    np.testing.assert_allclose(depth, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    runs, launches = est.model_runs, len(est.device.launches)
    for name in ("plasma", "viridis", "inferno", "grayscale"):
        assert_u8_close(result.colorize(name), ref.colormap(depth, name))
    # switching the colour map re-ran the colour-map kernel only: never the model
    assert est.model_runs == runs == 1
    assert est.device.launches[launches:] == ["apply_colormap"] * 4
    with pytest.raises(ValueError, match="unknown colour map"):
        result.colorize("jet")


def test_style(device: Device, small_models, photo_like) -> None:
    img = photo_like(50, 70)
    out = pipeline("style", small_models["style"], device.name)(img)
    assert_u8_close(out, testing.style(small_models["style"], img, (64, 64)))


@pytest.mark.parametrize("background", ["transparent", "color", "blur"])
def test_remove_bg(device: Device, small_models, photo_like, background: str) -> None:
    img = photo_like(40, 56)
    rb = pipeline("remove-bg", small_models["remove-bg"], device.name)
    result = rb(img, background=background, color="#00b140", blur_sigma=2.0)
    mask = testing.remove_bg_mask(small_models["remove-bg"], img, (64, 64), (128.0,) * 3,
                                  (256.0,) * 3)
    np.testing.assert_allclose(result.mask, mask, rtol=1e-4, atol=1e-5)
    if background == "transparent":
        want = ref.alpha_to_rgba(img, result.mask)
    elif background == "color":
        want = ref.composite_over(img, result.mask, np.array([[[0, 177, 64]]], np.uint8))
    else:
        want = ref.composite_over(img, result.mask, ref.gaussian_blur(img, 6, 2.0))
    assert_u8_close(result.image, want)


def test_upscale_matches_reference_and_whole_image(device: Device, small_models,
                                                   photo_like) -> None:
    img = photo_like(100, 90)  # 3×3 tiles of 48 with overlap 16
    up = pipeline("upscale", small_models["upscale"], device.name, overlap=16)
    luma = up.device.get(up.upscale_luma(img))
    assert luma.shape == (300, 270) and up.scale == 3
    want = testing.upscale_luma(small_models["upscale"], img, (48, 48), 16, 4)
    np.testing.assert_allclose(luma, want, rtol=1e-4, atol=1e-5)
    # seams: the tiled plane equals the model run on the whole image (zero-padding effects
    # at inner tile edges are discarded), so no seam anywhere
    whole = testing.upscale_whole_luma(small_models["upscale"], img)
    np.testing.assert_allclose(luma, whole, rtol=0, atol=2e-5)
    rgb = up(img)
    assert rgb.shape == (300, 270, 3)
    assert_u8_close(rgb, ref.merge_luma_chroma(whole, img))


def test_upscale_single_tile_equals_single_run(device: Device, small_models,
                                               photo_like) -> None:
    img = photo_like(48, 48)  # exactly one tile
    up = pipeline("upscale", small_models["upscale"], device.name)
    luma = up.device.get(up.upscale_luma(img))
    plane = up.device.get(imageops.luma(up.device, img))  # the same luma kernel
    direct = up.device.get(up.run_model(plane[None, None]))[0, 0]
    np.testing.assert_array_equal(luma, direct)


def test_upscale_image_smaller_than_a_tile(small_models, photo_like) -> None:
    img = photo_like(20, 33)
    out = pipeline("upscale", small_models["upscale"], "cpu")(img)
    assert out.shape == (60, 99, 3)


def test_unknown_task_and_model() -> None:
    from spawnml.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown task 'translate'; known: classify"):
        pipeline("translate")
    with pytest.raises(ValueError, match="not a file, a URL or a built-in name"):
        pipeline("classify", "no-such-model")


def test_model_by_url_goes_through_the_hub(small_models, photo_like, tmp_path,
                                           monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path / "cache"))
    url = small_models["classify"].as_uri()
    clf = pipeline("classify", url, "cpu")
    assert clf.model_path.is_relative_to(tmp_path / "cache" / "hub")
    local = pipeline("classify", small_models["classify"], "cpu")
    img = photo_like(30, 30)
    assert [p.index for p in clf(img)] == [p.index for p in local(img)]
    monkeypatch.setenv("SPAWNML_OFFLINE", "1")  # cached: still resolves offline
    assert pipeline("classify", url, "cpu").model_path == clf.model_path
