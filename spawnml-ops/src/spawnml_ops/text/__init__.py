"""String ops (ONNX STRING tensors, host-only by declaration): StringNormalizer,
StringConcat, StringSplit, RegexFullMatch, and TfIdfVectorizer (int64/int32 or string
tokens)."""

from __future__ import annotations

from spawnml.op import OpDef

from .normalize import StringNormalizer
from .regex import RegexFullMatch
from .split_concat import StringConcat, StringSplit
from .tfidf import TfIdfVectorizer

OPS: list[type[OpDef]] = [StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
                          TfIdfVectorizer]
