"""A text-generation model folder: model.onnx + tokenizer.json [+ genai_config.json /
config.json], or the name of a generated test model (``tiny_llama``, ``tiny_qwen2``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError


@dataclass
class ModelFolder:
    """What the generator reads from a folder; ``context`` is the longest sequence the
    model takes (None when no config says), ``eos`` its end-of-sequence token ids."""

    path: Path
    model: Path
    tokenizer: Path
    context: int | None = None
    eos: tuple[int, ...] = ()
    head_dim: int | None = None
    genai: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc


def _ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, list) else [value]))


def _resolve(ref: str | os.PathLike) -> Path:
    path = Path(ref)
    if path.exists():
        return path
    from .models import TINY_MODELS, tiny_model

    name, _, fmt = str(ref).partition(":")
    if name in TINY_MODELS:
        return tiny_model(name, fmt or "torch")
    raise InvalidInputError(f"model folder {str(ref)!r} does not exist (a folder with "
                            f"model.onnx and tokenizer.json, or a test model: "
                            f"{', '.join(TINY_MODELS)}[:torch|genai])")


def read_folder(ref: str | os.PathLike) -> ModelFolder:
    """The folder's files and settings; InvalidInputError naming what is missing."""
    path = _resolve(ref)
    if not path.is_dir():
        raise InvalidInputError(f"{path} is not a folder: text generation takes a model "
                                "folder (model.onnx + tokenizer.json)")
    genai = _read_json(path / "genai_config.json")
    config = _read_json(path / "config.json") or {}
    decoder = (genai or {}).get("model", {}).get("decoder", {})
    model = path / decoder.get("filename", "model.onnx")
    if not model.is_file():
        onnx_files = sorted(path.glob("*.onnx"))
        if len(onnx_files) != 1:
            raise InvalidInputError(f"{path}: no model.onnx (found {len(onnx_files)} .onnx "
                                    "files)")
        model = onnx_files[0]
    tokenizer = path / "tokenizer.json"
    if not tokenizer.is_file():
        raise InvalidInputError(f"{path}: no tokenizer.json (text generation needs the "
                                "model's tokenizer saved by the tokenizers package)")
    gm = (genai or {}).get("model", {})
    context = gm.get("context_length") or config.get("max_position_embeddings")
    heads = decoder.get("num_attention_heads") or config.get("num_attention_heads")
    head_dim = decoder.get("head_size") or config.get("head_dim") or (
        config["hidden_size"] // heads if heads and "hidden_size" in config else None)
    eos = _ids(gm.get("eos_token_id", config.get("eos_token_id")))
    return ModelFolder(path, model, tokenizer, int(context) if context else None, eos,
                       head_dim, genai, config)
