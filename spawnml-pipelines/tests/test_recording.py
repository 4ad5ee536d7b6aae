"""A pipeline recorded as plans (what a web page runs) computes what the pipeline computes.

Each recorded stage is replayed on its backend (``RecordedModel.run``: fresh buffers, the
weights' bytes, the launches in order) and compared with the Python pipeline on the same
backend: the same kernels on the same bytes, so the results agree to the last bit except
where float rounding reorders.
"""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import ExportError, InvalidInputError
from spawnml.export import web_targets
from spawnml_pipelines import pipeline
from spawnml_pipelines.kernels import colormap as cm
from spawnml_pipelines.recording import (
    PipelineRecording,
    PlanTensor,
    RecordingDevice,
    record_pipeline,
)

TARGETS = web_targets()
BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    name not in TARGETS, reason=f"the {name} backend is not installed"))
    for name in ("wasm", "webgpu")]


@pytest.fixture(params=BACKENDS)
def target_backend(request: pytest.FixtureRequest):
    from spawnml.registry import get_available_backends

    if request.param not in get_available_backends():
        pytest.skip(f"the {request.param} runtime is not available here")
    backend = TARGETS[request.param].backend()
    yield backend
    backend.close()


@pytest.fixture
def image(photo_like) -> np.ndarray:
    return photo_like(45, 61)


def test_classify_plan_equals_pipeline(target_backend, image) -> None:
    pipe = pipeline("classify", "squeezenet1_1", backend=target_backend)
    recording = record_pipeline(pipe, image.shape[:2])
    assert list(recording.stages) == ["main"]
    plan = recording.stages["main"]
    assert [t.name for t in plan.inputs] == ["image"] and plan.inputs[0].shape == (45, 61, 3)
    got = plan.run({"image": image})["logits"].reshape(-1)
    np.testing.assert_allclose(got, pipe.logits(image), rtol=1e-5, atol=1e-5)
    # the model's own launches are spliced between the pre-processing kernels
    assert plan.launches[0].label == "resize_hwc_to_nchw"
    assert plan.launches[1].label == "normalize_nchw"
    assert "labels" in recording.page


def test_depth_plan_and_colour_stage_equal_pipeline(target_backend, image) -> None:
    pipe = pipeline("depth", "depth_tiny", backend=target_backend)
    recording = record_pipeline(pipe, image.shape[:2])
    assert list(recording.stages) == ["main", "colorize"]
    main = recording.stages["main"].run({"image": image})
    want = pipe(image)
    np.testing.assert_allclose(main["depth"], want.depth, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(main["stats"], [want.depth.min(), want.depth.max()], rtol=1e-6)
    colorize = recording.stages["colorize"]
    assert sorted(t.name for t in colorize.inputs) == ["coefficients", "depth", "stats"]
    for name in ("inferno", "grayscale"):  # the stage takes any map's coefficients
        coefficients = np.asarray(recording.page["colormaps"][name], np.float32)
        np.testing.assert_array_equal(coefficients, cm.colormap_coefficients(name))
        rgb = colorize.run({"depth": main["depth"], "stats": main["stats"],
                            "coefficients": coefficients})["rgb"]
        off = np.abs(rgb.astype(int) - want.colorize(name).astype(int))
        assert off.max() <= 1 and (off > 0).mean() < 0.01


def test_remove_bg_plan_equals_pipeline(target_backend, image) -> None:
    # any model with a one-plane output drives the pipeline; the small depth model is quick
    pipe = pipeline("remove-bg", "depth_tiny", backend=target_backend, size=(224, 224))
    plan = record_pipeline(pipe, image.shape[:2]).stages["main"]
    got = plan.run({"image": image})
    want = pipe(image)
    np.testing.assert_allclose(got["mask"], want.mask, rtol=1e-5, atol=1e-6)
    off = np.abs(got["rgba"].astype(int) - want.image.astype(int))
    assert got["rgba"].shape == (45, 61, 4) and off.max() <= 1 and (off > 0).mean() < 0.01
    np.testing.assert_array_equal(got["rgba"][..., :3], image)


def test_style_plan_equals_pipeline(target_backend, image) -> None:
    pipe = pipeline("style", "transformer_net", backend=target_backend)
    plan = record_pipeline(pipe, image.shape[:2]).stages["main"]
    got = plan.run({"image": image})["rgb"]
    off = np.abs(got.astype(int) - pipe(image).astype(int))
    assert got.shape == (45, 61, 3) and off.max() <= 1 and (off > 0).mean() < 0.01


def test_a_model_run_twice_is_spliced_twice_with_one_copy_of_its_weights(target_backend
                                                                          ) -> None:
    import spawnml
    from spawnml_pipelines.models import resolve_model

    path = str(resolve_model("depth_tiny"))
    recording = PipelineRecording("test", (1, 1))
    dev = RecordingDevice(target_backend, path, recording)
    x = dev.input("x", (1, 3, 224, 224), DType.float32)
    a = dev.run_model(None, "input", x, "predicted_depth")
    weights = [n for n, b in enumerate(dev.plan.buffers) if b.kind == "weight"]
    launches = len(dev.plan.launches)
    b = dev.run_model(None, "input", x, "predicted_depth")
    assert [n for n, b in enumerate(dev.plan.buffers) if b.kind == "weight"] == weights
    assert len(dev.plan.launches) == 2 * launches and a.buffer != b.buffer
    dev.output("a", a)
    dev.output("b", b)
    data = np.random.default_rng(0).random((1, 3, 224, 224), np.float32)
    got = dev.plan.run({"x": data})
    want = spawnml.InferenceSession(path, backends=["cpu"]).run(None, {"input": data})[0]
    np.testing.assert_allclose(got["a"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got["a"], got["b"])


def test_recording_errors(target_backend) -> None:
    pipe = pipeline("classify", "squeezenet1_1", backend=target_backend)
    with pytest.raises(InvalidInputError, match="image size must be positive"):
        record_pipeline(pipe, (0, 10))
    pipe.record = None  # a pipeline without a page plan
    with pytest.raises(ExportError, match="cannot be recorded"):
        record_pipeline(pipe, (32, 32))
    with pytest.raises(ExportError, match="keeps every step on the device"):
        PlanTensor((2,), DType.float32, 0).numpy()
    dev = RecordingDevice(target_backend, None, PipelineRecording("test", (1, 1)))
    x = dev.input("x", (2,), DType.float32)
    with pytest.raises(ExportError, match="not computed by the plan"):
        dev.output("y", x)
    with pytest.raises(ExportError, match="recorded twice"):
        dev.stage("main")
    with pytest.raises(InvalidInputError, match=r"feeds: expected \['x'\]"):
        dev.plan.run({"z": np.zeros(2, np.float32)})


def test_upscale_plan_runs_every_tile_on_the_device(target_backend, photo_like) -> None:
    image = photo_like(240, 300)  # 2 x 2 tiles of 224
    pipe = pipeline("upscale", "espcn_x3", backend=target_backend)
    recording = record_pipeline(pipe, image.shape[:2])
    plan = recording.stages["main"]
    got = plan.run({"image": image})["rgb"]
    want = pipe(image)
    assert got.shape == (240 * 3, 300 * 3, 3)
    off = np.abs(got.astype(int) - want.astype(int))
    assert off.max() <= 1 and (off > 0).mean() < 0.01
    tiles = sum(launch.label == "place_tile" for launch in plan.launches)
    assert tiles == 4
    # the stacks ping-pong between two buffers: closed intermediates are reused
    stacks = {launch.out for launch in plan.launches if launch.label == "place_tile"}
    assert len(stacks) == 2
