"""Small encoder-decoders with deterministic random weights, for the depth pipeline (and a
mask head for quick background-removal tests).

No public depth model installs from a package registry, so the depth pipeline is tested with
``depth_tiny``: a 3×224×224 image in, a 1×112×112 relative-depth map out (like Depth Anything,
coarser than the image and with a ReLU head). Encoder: three stride-2 conv stages; decoder:
bilinear Resize, conv and skip Add, as a DPT-style head does. ``mask_tiny`` is the same
network with IS-Net's head (sigmoid, 1×1×H×W at the input resolution).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from spawnml.hub import cache_dir
from spawnml.testing.models.builder import FLOAT, GraphBuilder

VERSION = 1  # bump when the architecture or seed changes


def encoder_decoder(name: str, size: int = 224, head: str = "depth", seed: int = 7
                    ) -> onnx.ModelProto:
    """``head="depth"``: (1, size/2, size/2) ReLU output; ``"mask"``: (1, 1, size, size)
    sigmoid output. Ops: Conv, Relu, Resize (linear), Add, Reshape, Sigmoid."""
    if size % 8:
        raise ValueError(f"size {size} must be a multiple of 8")
    b = GraphBuilder(name, seed)

    def up(x: str) -> str:
        scales = b.const("scales", np.array([1, 1, 2, 2], np.float32))
        return b.op("Resize", [x, "", scales], mode="linear")

    e1 = b.relu(b.conv("input", 3, 16, 3, stride=2))  # size / 2
    e2 = b.relu(b.conv(e1, 16, 32, 3, stride=2))  # size / 4
    e3 = b.relu(b.conv(e2, 32, 64, 3, stride=2))  # size / 8
    d2 = b.relu(b.op("Add", [b.conv(up(e3), 64, 32, 3), e2]))
    d1 = b.relu(b.op("Add", [b.conv(up(d2), 32, 16, 3), e1]))
    if head == "depth":
        out_shape = [1, size // 2, size // 2]
        y = b.relu(b.conv(d1, 16, 1, 3, gain=1.0))
        out = b.op("Reshape", [y, b.ints("shape", out_shape)])
        name_out = "predicted_depth"
    else:
        out_shape = [1, 1, size, size]
        out = b.op("Sigmoid", [b.conv(up(d1), 16, 1, 3, gain=1.0)])
        name_out = "mask"
    model = b.model([("input", FLOAT, [1, 3, size, size])], [(out, name_out, FLOAT, out_shape)])
    if head == "depth":
        # the preprocessing travels with the model: the pipelines read it
        model.metadata_props.add(key="spawnml.mean", value="123.675,116.28,103.53")
        model.metadata_props.add(key="spawnml.std", value="58.395,57.12,57.375")
    return model


def _file(name: str, size: int) -> Path:
    return cache_dir() / "models" / "generated" / f"{name}-{size}-v{VERSION}.onnx"


def generated_path(name: str = "depth_tiny", size: int = 224, head: str = "depth") -> Path:
    """The generated model's path, built into ``<cache>/models/generated`` on first use."""
    path = _file(name, size)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{id(path)}.tmp")
        onnx.save(encoder_decoder(name, size, head), tmp)
        tmp.replace(path)  # atomic for concurrent builders
    return path


def depth_model_path() -> Path:
    return generated_path("depth_tiny", 224, "depth")


def cached_depth_model() -> Path | None:
    """``depth_tiny``'s path when it is already built, else None (builds nothing)."""
    path = _file("depth_tiny", 224)
    return path if path.exists() else None
