"""Tokenizers from ``tokenizer.json`` (the ``tokenizers`` package), with streaming decode."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError, MissingDependencyError


def load_tokenizer(path: Path) -> Any:
    """A ``tokenizers.Tokenizer`` from ``path``; InvalidInputError when it is missing or bad."""
    if not path.is_file():
        raise InvalidInputError(f"no tokenizer: {path} does not exist (text generation needs "
                                "the model's tokenizer.json beside model.onnx)")
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError(
            "text generation needs the tokenizers package (pip install tokenizers)") from exc
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:
        raise InvalidInputError(f"cannot read tokenizer {path}: {exc}") from exc


class StreamDecoder:
    """Turns token ids, one at a time, into the text they add (UTF-8 safe: a character
    split over several byte tokens comes out whole, once its last byte is in)."""

    def __init__(self, tokenizer: Any, prompt_ids: Sequence[int] = ()) -> None:
        self.tokenizer = tokenizer
        # Decode with a little context so leading spaces and merges render as they would.
        self.ids: list[int] = list(prompt_ids[-4:])
        self.prefix = len(self.ids)
        self.emitted = self._decode(self.ids)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if ids else ""

    def add(self, token: int) -> str:
        """The new text after ``token`` ("" while a multi-byte character is incomplete)."""
        self.ids.append(int(token))
        text = self._decode(self.ids)
        if text.endswith("\ufffd") or not text.startswith(self.emitted):
            return ""
        new, self.emitted = text[len(self.emitted):], text
        if len(self.ids) > self.prefix + 64:  # keep the decoded window short
            self.ids = self.ids[-8:]
            self.emitted = self._decode(self.ids)
        return new
