"""The ``text-generation`` pipeline: ``pipeline("text-generation", model=FOLDER)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ..base import BackendRef, ModelRef, Pipeline
from .generator import GeneratedToken, GenerationResult, TextGenerator


class TextGenerationPipeline(Pipeline):
    """Generates text from a prompt; ``stream`` yields tokens as they come.

    ``model``: a model folder (model.onnx + tokenizer.json) or a test model name;
    ``options``: TextGenerator's (``kv_block``)."""

    task: ClassVar[str] = "text-generation"
    default_model: ClassVar[str] = "tiny_llama"

    def __init__(self, model: ModelRef = None, backend: BackendRef = None, *,
                 progress: bool | None = None, **options: Any) -> None:
        self.generator = TextGenerator(model or self.default_model, backend, **options)
        self.session = self.generator.session
        self.model_path = self.generator.folder.model
        self.progress = progress
        self.model_runs = 0

    @property
    def backend(self) -> str:
        return self.generator.backend

    def __call__(self, prompt: str, **settings: Any) -> GenerationResult:
        """The generated text; ``settings`` are GenerationConfig fields (max_tokens,
        temperature, top_k, top_p, repetition_penalty, seed, stop_tokens, ignore_eos)."""
        return self.generator.generate(prompt, **settings)

    def stream(self, prompt: str, **settings: Any) -> Iterator[GeneratedToken]:
        """Tokens and their text as they are generated."""
        return self.generator.stream(prompt, **settings)

    def close(self) -> None:
        self.generator.close()
