"""Text generation with decoder-only ONNX models, the KV cache kept on the device.

    from spawnml_pipelines.text import TextGenerator
    with TextGenerator("path/to/model_folder", "webgpu") as gen:
        for token in gen.stream("Once upon a time", max_tokens=32, temperature=0.8, seed=1):
            print(token.text, end="", flush=True)
"""

from __future__ import annotations

from .generator import (
    GeneratedToken,
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    TextGenerator,
)
from .pipeline import TextGenerationPipeline
from .sampling import SamplingConfig

__all__ = ["TextGenerator", "TextGenerationPipeline", "GenerationConfig", "GenerationResult",
           "GenerationStats", "GeneratedToken", "SamplingConfig"]
