"""``spawnml export-web --pipeline TASK`` pages in a real headless Chromium: the picked
photo goes through the pipeline's own generated kernels (pre-processing, model,
post-processing) on WebGPU, WebGL2 and Wasm, and the results match the Python pipeline.

Each page is exported for the photo's own size (300x451, the cat), so the browser draws it
without resampling and the page sees the same bytes as Python. Screenshots of the pages go
to ``$SPAWNML_SCREENSHOTS`` (the docs' images) when set, else to a temporary folder.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from spawnml_pipelines import pipeline
from spawnml_pipelines.image_io import load_image
from spawnml_pipelines.samples import sample_image
from spawnml_web import export_web
from spawnml_web.browser import Browser, BrowserError, serve, unavailable_reason

REASON = unavailable_reason()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REASON is not None, reason=f"no browser: {REASON}")]

ALL = ["webgpu", "webgl", "wasm"]
PAGES = {  # name: (task, model, backends)
    "classify": ("classify", "squeezenet1_1", ALL),
    "depth": ("depth", "depth_tiny", ALL),
    "style": ("style", "transformer_net", ["webgpu", "wasm"]),  # webgl: 30 s a run
    "upscale": ("upscale", "espcn_x3", ["webgpu", "wasm"]),  # 6 tiles of 224 on the cat
    "remove-bg": ("remove-bg", "isnet", ["wasm"]),  # IS-Net at 1024x1024: ~1 min on wasm
    "cutout-webgpu": ("remove-bg", "depth_tiny", ["webgpu"]),  # drawn from the device
}


@pytest.fixture(scope="module")
def photo() -> Path:
    return sample_image("chelsea.png")


@pytest.fixture(scope="module")
def image(photo) -> np.ndarray:
    return load_image(photo)


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def site(tmp_path_factory, photo, image):
    """Every page exported once for the photo's size, served with the photo beside them."""
    root = tmp_path_factory.mktemp("pages")
    for name, (task, model, backends) in PAGES.items():
        export_web(model, root / name, backends, pipeline=task, image_size=image.shape[:2])
    shutil.copyfile(photo, root / "cat.png")
    with serve(root) as url:
        yield root, url


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get("SPAWNML_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


def _open(browser, url: str, page: str, backend: str, **query) -> dict:
    report = browser.open_pipeline(f"{url}{page}/", backend, "../cat.png", **query)
    assert report["backend"] == backend and report["modelRuns"] == 1
    return report


def _close_u8(got: np.ndarray, want: np.ndarray, share: float = 0.99) -> None:
    """uint8 images agree within one level on ``share`` of the values (a value within f32
    rounding of .5 may round either way on another device)."""
    assert got.shape == want.shape and got.dtype == np.uint8
    off = np.abs(got.astype(int) - want.astype(int))
    assert (off <= 1).mean() >= share, (off.max(), (off <= 1).mean())


def _close(got: np.ndarray, want: np.ndarray, tol: float = 1e-4) -> None:
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= tol * np.maximum(1.0, np.abs(want))), \
        np.abs(got - want).max()


@pytest.mark.parametrize("backend", ALL)
def test_classify_page_matches_the_python_pipeline(browser, site, image, backend):
    _, url = site
    report = _open(browser, url, "classify", backend)
    want = pipeline("classify", "squeezenet1_1", backend="cpu").logits(image)
    _close(browser.page_output("logits").reshape(-1), want)
    top = [p["index"] for p in report["top"]]
    assert top == list(np.argsort(-want, kind="stable")[:5])


@pytest.mark.parametrize("backend", ALL)
def test_depth_page_switches_colour_maps_without_inference(browser, site, image, backend):
    _, url = site
    report = _open(browser, url, "depth", backend, colormap="viridis")
    assert report["colorizeRuns"] == 1
    want = pipeline("depth", "depth_tiny", backend="cpu")(image)
    _close(browser.page_output("depth"), want.depth)
    report = browser.pick_colormap("inferno")
    assert report["modelRuns"] == 1 and report["colorizeRuns"] == 2
    _close_u8(browser.page_output("colors"), want.colorize("inferno"))


@pytest.mark.parametrize("backend", PAGES["style"][2])
def test_style_page_matches_the_python_pipeline(browser, site, image, backend):
    _, url = site
    _open(browser, url, "style", backend)
    want = pipeline("style", "transformer_net", backend="cpu")(image)
    _close_u8(browser.page_output("rgb"), want)


@pytest.mark.parametrize("backend", PAGES["upscale"][2])
def test_upscale_page_matches_the_python_pipeline(browser, site, image, backend):
    _, url = site
    report = _open(browser, url, "upscale", backend)
    assert report["modelRuns"] == 1  # one plan run: the model's launches once per tile
    want = pipeline("upscale", "espcn_x3", backend="cpu")(image)
    _close_u8(browser.page_output("rgb"), want)


@pytest.fixture(scope="module")
def isnet_mask(image) -> np.ndarray:
    """The cat's mask by onnxruntime with numpy pre- and post-processing."""
    from spawnml_pipelines import testing
    from spawnml_pipelines.models import resolve_model

    return testing.remove_bg_mask(resolve_model("isnet"), image, (1024, 1024), (128.0,) * 3,
                                  (256.0,) * 3, output="output")


def _check_cutout(browser, image, isnet_mask) -> None:
    """Acceptance: the alpha within one level of the Python pipeline's on >= 99% of the
    pixels; the IS-Net mask within 2e-3 of onnxruntime's."""
    want = pipeline("remove-bg", "isnet", backend="cpu")(image)
    rgba = browser.page_output("rgba")
    _close_u8(rgba[..., 3], want.image[..., 3])
    np.testing.assert_array_equal(rgba[..., :3], image)
    assert np.abs(browser.page_output("mask") - isnet_mask).max() <= 2e-3


def test_remove_bg_page_on_the_cat(browser, site, image, isnet_mask, screenshots):
    _, url = site
    report = _open(browser, url, "remove-bg", "wasm")
    _check_cutout(browser, image, isnet_mask)
    browser.screenshot(screenshots / "web-remove-bg.png")
    print(f"remove-bg page (IS-Net 1024x1024, wasm in Chromium): {report['runMs']:.0f} ms")


HEAVY = [pytest.param(b, marks=pytest.mark.skipif(
    b not in os.environ.get("SPAWNML_HEAVY_BACKENDS", "").split(",") and
    os.environ.get("SPAWNML_HEAVY_BACKENDS") != "all",
    reason=f"IS-Net on {b} in SwiftShader takes minutes: set SPAWNML_HEAVY_BACKENDS={b} "
    "(or all) to run it")) for b in ("webgpu", "webgl")]  # fmt: skip


@pytest.mark.parametrize("backend", HEAVY)
def test_remove_bg_page_on_gpu_targets(browser, tmp_path, photo, image, isnet_mask, backend):
    export_web("isnet", tmp_path, [backend], pipeline="remove-bg", image_size=image.shape[:2])
    shutil.copyfile(photo, tmp_path / "cat.png")
    with serve(tmp_path) as url:
        report = browser.open_pipeline(url, backend, "cat.png", timeout_s=3600)
        assert report["backend"] == backend
        _check_cutout(browser, image, isnet_mask)
    print(f"remove-bg page (IS-Net 1024x1024, {backend} in Chromium): {report['runMs']:.0f} ms")


_CANVAS_PIXELS = """() => {
  const shown = document.querySelector("#result canvas");
  spawnmlPage.redraw();  // a WebGPU canvas can be copied in the task that drew it
  const copy = document.createElement("canvas");
  Object.assign(copy, { width: shown.width, height: shown.height });
  const context = copy.getContext("2d");
  context.drawImage(shown, 0, 0);
  const data = context.getImageData(0, 0, shown.width, shown.height).data;
  let text = "";
  for (let i = 0; i < data.length; i += 32768) {
    text += String.fromCharCode(...data.subarray(i, i + 32768));
  }
  return { shape: [shown.height, shown.width, 4], data: btoa(text) };
}"""


def test_webgpu_cutout_is_drawn_from_the_device_buffer(browser, site, image):
    """On WebGPU the cut-out goes from the output buffer to the canvas by a render pass
    (no readback); the canvas then holds the RGBA the plan computed."""
    _, url = site
    _open(browser, url, "cutout-webgpu", "webgpu")
    drawn = browser.evaluate(_CANVAS_PIXELS)
    pixels = np.frombuffer(base64.b64decode(drawn["data"]), np.uint8).reshape(drawn["shape"])
    rgba = browser.page_output("rgba")
    assert pixels.shape == rgba.shape
    _close_u8(pixels[..., 3], rgba[..., 3])
    # colour where alpha >= 128 (the canvas stores it premultiplied: +-1 level unpremultiplied)
    solid = rgba[..., 3] >= 128
    assert solid.mean() > 0.05
    off = np.abs(pixels[solid][:, :3].astype(int) - rgba[solid][:, :3].astype(int))
    assert (off <= 1).mean() >= 0.99, off.max()


@pytest.mark.parametrize("page", ["classify", "depth", "style", "upscale"])
def test_page_screenshots(browser, site, screenshots, page):
    _, url = site
    _open(browser, url, page, "webgpu")
    browser.screenshot(screenshots / f"web-{page}.png")
    assert (screenshots / f"web-{page}.png").stat().st_size > 10_000


def test_a_photo_of_another_size_is_drawn_at_the_export_size(browser, site, tmp_path):
    root, url = site
    export_web("depth_tiny", root / "small", ["wasm"], pipeline="depth", image_size=(60, 80))
    _open(browser, url, "small", "wasm")
    assert browser.page_output("depth").shape == (60, 80)
    caption = browser.page.text_content("#photo-caption")
    assert "451×300 photo, drawn at the export's 80×60" in caption


def test_page_errors_are_shown(browser, site):
    _, url = site
    with pytest.raises(BrowserError, match=r"cannot fetch the image \.\./missing\.png: HTTP 404"):
        browser.open_pipeline(f"{url}classify/", "wasm", "../missing.png", timeout_s=60)
    assert "error" in browser.page.get_attribute("#status", "class")
