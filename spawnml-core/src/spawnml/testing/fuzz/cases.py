"""A fuzz case, rebuilt exactly from ``(kind, seed)``: model bytes, feeds and a label.

``kind`` is ``"mutation"`` (a damaged seed model, see ``mutate``) or ``"graph"`` (a random
valid graph, see ``graphs``). Feeds of a mutated model follow its declared inputs where they
still parse (a declared dim that is not a small positive number takes the seed model's size),
and the seed model's inputs where the bytes no longer parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from .graphs import generate, make_feed
from .mutate import mutate
from .seeds import seed_model

KINDS = ("mutation", "graph")
MAX_FEED_ELEMENTS = 1 << 20


@dataclass
class Case:
    """One input to the oracle: ``model`` bytes and ``feeds``, reproducible from kind+seed."""

    kind: str
    seed: int
    model: bytes
    feeds: dict[str, np.ndarray]
    label: str
    ops: list[str] = field(default_factory=list)

    @property
    def nonfinite(self) -> bool:
        """Whether any float feed holds NaN or ±inf."""
        return any(np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all()
                   for a in self.feeds.values())


def case_seed(base: int, index: int) -> int:
    """The seed of case ``index`` of a run started with ``--seed base``."""
    return base * 1_000_000 + index


def _declared(vi: onnx.ValueInfoProto) -> tuple[np.dtype, list[int | None]] | None:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        return None
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except Exception:  # noqa: BLE001 - unknown/undefined element type codes
        dtype = np.dtype(np.float32)
    if dtype.kind not in "fiub":
        dtype = np.dtype(np.float32)
    if not tt.HasField("shape"):
        return dtype, []
    dims = [d.dim_value if d.HasField("dim_value") and 0 <= d.dim_value <= 64 else None
            for d in tt.shape.dim]
    return dtype, dims


def feeds_for(data: bytes, seed_name: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Feeds for a (possibly damaged) model: one array per declared non-initializer input."""
    seed = seed_model(seed_name)
    seed_shapes = {
        vi.name: [d.dim_value if d.HasField("dim_value") else 2
                  for d in vi.type.tensor_type.shape.dim] for vi in seed.graph.input}
    try:
        model = onnx.ModelProto.FromString(data)
        graph = model.graph
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends: bytes that no longer parse
        graph = seed.graph
    inits = {t.name for t in graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for vi in graph.input:
        name = vi.name if isinstance(vi.name, str) else repr(vi.name)
        if name in inits or name in feeds:
            continue
        declared = _declared(vi) or (np.dtype(np.float32), [])
        dtype, dims = declared
        fallback = seed_shapes.get(name, [])
        shape = [d if d is not None else (fallback[i] if i < len(fallback) else 2)
                 for i, d in enumerate(dims)]
        if int(np.prod(shape, dtype=np.int64)) > MAX_FEED_ELEMENTS:
            shape = fallback
        feeds[name] = make_feed(rng, shape, dtype, nonfinite=False)
    return feeds


def make_case(kind: str, seed: int) -> Case:
    """The case of ``kind`` and ``seed`` (``reproduce`` in reports): the same every call."""
    if kind == "mutation":
        mutated = mutate(seed)
        feeds = feeds_for(mutated.model, mutated.seed_name, np.random.default_rng(seed + 1))
        label = f"{mutated.seed_name}: " + "; ".join(mutated.steps)
        return Case(kind, seed, mutated.model, feeds, label, [mutated.seed_name])
    if kind == "graph":
        generated = generate(seed)
        label = f"opset {generated.opset}: " + " ".join(generated.ops)
        return Case(kind, seed, generated.model, generated.feeds, label, generated.ops)
    raise ValueError(f"unknown case kind {kind!r}; kinds are {KINDS}")


def save_case(case: Case, directory: str | Path, stem: str | None = None) -> Path:
    """Write ``<stem>.onnx``, ``<stem>.npz`` (the feeds) and ``<stem>.json`` (kind, seed,
    label) under ``directory``; returns the .onnx path."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem = stem or f"{case.kind}-{case.seed}"
    path = folder / f"{stem}.onnx"
    path.write_bytes(case.model)
    # np.savez keys must be str; feed names are kept in the order of the json's "feeds"
    np.savez(folder / f"{stem}.npz", *case.feeds.values())
    meta = {"kind": case.kind, "seed": case.seed, "label": case.label,
            "feeds": list(case.feeds)}
    (folder / f"{stem}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return path
