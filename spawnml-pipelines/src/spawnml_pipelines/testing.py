"""Reference pipelines for the tests: numpy pre/post-processing around onnxruntime.

Each function computes what the matching spawnml pipeline computes, independently of
spawnml's session and kernels (numpy twins from ``kernels.reference``; the model through
onnxruntime), so a test can compare the two.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import imageops
from .kernels import reference as ref
from .kernels.tiling import tile_grid


def ort_session(path: Path | str, *, free_spatial_dims: bool = False):
    """An onnxruntime CPU session (optionally with the input/output H, W made symbolic)."""
    import onnx
    import onnxruntime as ort

    if not free_spatial_dims:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = onnx.load(str(path))
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        for d, name in zip(dims[-2:], ("h", "w")):
            d.ClearField("dim_value")
            d.dim_param = f"{value.name}_{name}"
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def ort_run(sess, x: np.ndarray, output: str | None = None) -> np.ndarray:
    name = sess.get_inputs()[0].name
    return sess.run([output] if output else None, {name: x.astype(np.float32)})[0]


def classify(path, img, size, resize_short, mean, std) -> np.ndarray:
    box = imageops.center_crop_box(img.shape[0], img.shape[1], size, resize_short)
    x = ref.normalize_nchw(ref.resize_hwc_to_nchw(img, *size, box), mean, std, 1.0)
    logits = ort_run(ort_session(path), x).reshape(-1).astype(np.float64)
    p = np.exp(logits - logits.max())
    return p / p.sum()


def depth(path, img, size, mean, std) -> np.ndarray:
    x = ref.normalize_nchw(ref.resize_hwc_to_nchw(img, *size), mean, std, 1.0)
    pred = ort_run(ort_session(path), x)
    return ref.resize_planes(pred.reshape(pred.shape[-2:]), *img.shape[:2])


def style(path, img, size) -> np.ndarray:
    y = ort_run(ort_session(path), ref.resize_hwc_to_nchw(img, *size))
    if y.shape[-2:] != img.shape[:2]:
        y = ref.resize_planes(y, *img.shape[:2])
    return ref.nchw_to_hwc_u8(y)


def remove_bg_mask(path, img, size, mean, std, output: str | None = None) -> np.ndarray:
    x = ref.normalize_nchw(ref.resize_hwc_to_nchw(img, *size), mean, std, 1.0)
    pred = ort_run(ort_session(path), x, output)
    return ref.resize_planes(pred.reshape(pred.shape[-2:]), *img.shape[:2])


def upscale_luma(path, img, tile, overlap, margin) -> np.ndarray:
    """The tiled, blended luma plane (float32) the same way the pipeline builds it."""
    sess = ort_session(path)
    h, w = img.shape[:2]
    grid = tile_grid(h, w, *tile, overlap)
    y = ref.rgb_to_luma(img)
    ys = np.clip(np.arange(tile[0])[None, :] + grid.oy[:, None], 0, h - 1)
    xs = np.clip(np.arange(tile[1])[None, :] + grid.ox[:, None], 0, w - 1)
    tiles = np.stack([y[np.ix_(ys[i], xs[j])] for i in range(len(grid.oy))
                      for j in range(len(grid.ox))])[:, None]
    up = np.concatenate([ort_run(sess, tiles[i : i + 1]) for i in range(len(tiles))])
    scale = up.shape[2] // tile[0]
    return ref.blend_tiles(up, grid, h * scale, w * scale, scale, margin * scale,
                           float(max(overlap * scale - 2 * margin * scale, 1)))


def upscale_whole_luma(path, img) -> np.ndarray:
    """The luma plane upscaled in one piece (the model with free spatial dims): no tiles."""
    sess = ort_session(path, free_spatial_dims=True)
    return ort_run(sess, ref.rgb_to_luma(img)[None, None])[0, 0]


def with_input_size(path: Path | str, size: tuple[int, int], dest: Path) -> Path:
    """A copy of a fully convolutional model declaring another fixed input size (same
    weights); output and intermediate shapes are left for inference. Tests use it to run
    the generated 224×224 models at small sizes."""
    import onnx

    if dest.exists():
        return dest
    model = onnx.load(str(path))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[-2].dim_value, dims[-1].dim_value = size
    for out in model.graph.output:
        for i, d in enumerate(out.type.tensor_type.shape.dim):
            if i >= 1:
                d.ClearField("dim_value")
                d.dim_param = f"{out.name}_{i}"
    del model.graph.value_info[:]
    dest.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dest))
    return dest


# -- backends to parametrise tests over -------------------------------------------------------

DEFAULT_BACKENDS = ("cpu", "webgpu")


def available_backends() -> dict[str, str | None]:
    """Every registered backend -> None when it can run here, else the reason it cannot."""
    from spawnml.registry import list_backends

    return {i.name: (None if i.available else i.reason) for i in list_backends()}


def backend_param(name: str, *, slow: bool = False, skip: str | None = None):
    """A pytest param for a backend, skipped with the reason where it cannot run."""
    import pytest

    reason = skip or available_backends().get(name, f"backend {name!r} is not registered")
    marks = [pytest.mark.skip(reason=f"{name}: {reason}")] if reason else []
    if slow:
        marks.append(pytest.mark.slow)
    return pytest.param(name, marks=marks, id=name)


def backend_params(env: str = "SPAWNML_PIPELINE_BACKENDS", default=DEFAULT_BACKENDS,
                   others: str = "slow") -> list:
    """Params for the backends named in ``$env`` (default ``default``; ``all``), then every
    other backend marked slow (``others="slow"``) or skipped with how to enable it."""
    import os

    names = list(available_backends())
    wanted = os.environ.get(env, ",".join(default))
    chosen = names if wanted == "all" else [n for n in wanted.split(",") if n]
    rest = [n for n in names if n not in chosen]
    if others == "slow":
        return [backend_param(n) for n in chosen] + [backend_param(n, slow=True) for n in rest]
    return [backend_param(n) for n in chosen] + [
        backend_param(n, skip=f"set {env}={n} (or all) to run it here") for n in rest]
