"""The generation loop: prefill the prompt, then decode one token per model run, with the
KV cache kept on the device (see :mod:`.kv_cache`) and only the last position's logits (or,
for greedy decoding, their argmax) copied to the host."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spawnml.errors import InvalidInputError
from spawnml.session import InferenceSession

from ..base import BackendRef, backend_list
from .decode_graph import LAST_LOGITS, NEXT_TOKEN, ProtoSignature, extend_for_decoding
from .device_ops import DeviceOps
from .folder import read_folder
from .kv_cache import KVCache
from .layout import discover_layout
from .sampling import Sampler, SamplingConfig
from .tokenizer import StreamDecoder, load_tokenizer

_ONNX_ELEM = {"float32": 1, "float16": 10}


@dataclass(frozen=True)
class GenerationConfig(SamplingConfig):
    """Sampling settings plus when to stop: after ``max_tokens`` new tokens, at one of
    ``stop_tokens`` or (unless ``ignore_eos``) the model's end-of-sequence tokens, or when
    the model's context is full. The stop token itself is returned."""

    max_tokens: int = 64
    stop_tokens: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidInputError(f"max_tokens must be a positive int, got {self.max_tokens!r}")


@dataclass
class GenerationStats:
    """Counts and times of one generation (model runs and their device helpers only, not
    the time a consumer of the stream spends between tokens)."""

    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stop_reason: str = ""  # "stop", "length" or "context"

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first (which the prefill produces) per second of decode steps."""
        steps = self.new_tokens - 1
        return steps / self.decode_s if steps > 0 and self.decode_s else 0.0


@dataclass(frozen=True)
class GeneratedToken:
    """One streamed token: its id and the text it adds ("" while a character is split)."""

    id: int
    text: str


@dataclass
class GenerationResult:
    """A finished generation: the new text and token ids, and how it went."""

    text: str
    token_ids: list[int]
    stats: GenerationStats = field(default_factory=GenerationStats)


class TextGenerator:
    """Generates text with a decoder-only ONNX model on spawnml backends.

    ``model``: a folder (model.onnx + tokenizer.json [+ genai_config.json / config.json]) or
    a test model name; ``backend``: a name or preference list (cpu runs what a device
    cannot); ``kv_block``: positions the cache window grows by when full (bigger: fewer
    plans, more padded positions attended each step; a shared GroupQueryAttention buffer
    is sized to prompt + new tokens rounded up to it); ``device_argmax``: greedy decoding
    takes the argmax on the device and copies one id instead of a row of logits (default:
    on every backend but cpu, whose buffers are host memory already)."""

    def __init__(self, model: str | os.PathLike, backend: BackendRef = None, *,
                 kv_block: int = 64, device_argmax: bool | None = None) -> None:
        if not isinstance(kv_block, int) or kv_block < 1:
            raise InvalidInputError(f"kv_block must be a positive int, got {kv_block!r}")
        self.folder = read_folder(model)
        self.tokenizer = load_tokenizer(self.folder.tokenizer)
        self.session = self._load_session(backend)
        try:
            elem = _ONNX_ELEM.get(self.layout.dtype.name, 1)
            self.ops = DeviceOps(self.session.backends, len(self.layout.past), elem, kv_block)
        except BaseException:
            self.session.close()
            raise
        self.kv_block = kv_block
        self.device_argmax = (self.backend != "cpu") if device_argmax is None else device_argmax
        self.last_stats = GenerationStats()

    def _load_session(self, backend: BackendRef) -> InferenceSession:
        """The session of the model extended with the step outputs (:mod:`.decode_graph`);
        sets ``layout``."""
        import onnx

        proto = onnx.load(str(self.folder.model))
        signature = ProtoSignature(proto)
        self.layout = discover_layout(signature, signature.op_types, self.folder.genai,
                                      self.folder.head_dim)
        extend_for_decoding(proto, self.layout.logits, self.layout.present,
                            self.layout.windowed)
        return InferenceSession(proto, backends=backend_list(backend))

    @property
    def backend(self) -> str:
        return self.session.backends[0].name

    @property
    def context(self) -> int | None:
        return self.folder.context

    # -- tokens ---------------------------------------------------------------------------
    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids; InvalidInputError for an empty prompt."""
        if not isinstance(prompt, str):
            raise InvalidInputError(f"prompt must be a str, got {type(prompt).__name__}")
        ids = self.tokenizer.encode(prompt).ids
        if not ids:
            raise InvalidInputError("the prompt is empty (it encodes to no tokens)")
        return list(ids)

    def _limit(self, prompt: Sequence[int], config: GenerationConfig) -> int:
        if self.context is not None and len(prompt) >= self.context:
            raise InvalidInputError(
                f"the prompt has {len(prompt)} tokens but the model's context is "
                f"{self.context} tokens (prompt + new tokens must fit it)")
        room = self.context - len(prompt) if self.context else config.max_tokens
        return min(config.max_tokens, room)

    def generate_ids(self, prompt: Sequence[int], config: GenerationConfig | None = None
                     ) -> Iterator[int]:
        """New token ids, streamed as they are chosen; ``last_stats`` is filled as it goes."""
        config = config or GenerationConfig()
        prompt = [int(t) for t in prompt]
        limit = self._limit(prompt, config)
        stops = set(config.stop_tokens) | (set() if config.ignore_eos else set(self.folder.eos))
        stats = self.last_stats = GenerationStats(prompt_tokens=len(prompt))
        sampler, seen = Sampler(config), list(prompt)
        cache = KVCache(self.layout, self.ops, self.kv_block,
                        self._shared_capacity(len(prompt) + limit))
        try:
            start = time.perf_counter()
            token = self._step(cache, prompt, sampler, seen)
            stats.prefill_s = time.perf_counter() - start
            while True:
                stats.new_tokens += 1
                seen.append(token)
                yield token
                if token in stops:
                    stats.stop_reason = "stop"
                    return
                if stats.new_tokens >= limit:
                    stats.stop_reason = "length" if limit == config.max_tokens else "context"
                    return
                start = time.perf_counter()
                token = self._step(cache, [token], sampler, seen)
                stats.decode_s += time.perf_counter() - start
        finally:
            cache.close()

    def _shared_capacity(self, needed: int) -> int:
        """A shared cache's length: ``needed`` rounded up to ``kv_block``, within the
        context (one plan for every decode step of generations that fit it)."""
        capacity = -(-needed // self.kv_block) * self.kv_block
        return min(capacity, self.context) if self.context else capacity

    def _step(self, cache: KVCache, ids: Sequence[int], sampler: Sampler, seen: list[int]
              ) -> int:
        """One model run over ``ids`` after the cached tokens; returns the next token."""
        lay, n = self.layout, len(ids)
        feeds: dict[str, Any] = {lay.input_ids: np.array([ids], lay.input_types[lay.input_ids])}
        if lay.attention_mask:
            feeds[lay.attention_mask] = cache.attention_mask(n).astype(
                lay.input_types[lay.attention_mask])
        if lay.position_ids:
            positions = np.arange(cache.length, cache.length + n)[None]
            feeds[lay.position_ids] = positions.astype(lay.input_types[lay.position_ids])
        feeds.update(cache.feeds())
        greedy = self.device_argmax and sampler.config.argmax_on_device
        head = NEXT_TOKEN if greedy else LAST_LOGITS
        result, *kv = self.session.run([head, *cache.outputs()], feeds, device=True)
        try:
            cache.update(kv, n)
        except BaseException:
            for t in kv:
                t.close()
            raise
        try:
            row = result.numpy()
        finally:
            result.close()
        return int(row.reshape(-1)[0]) if greedy else sampler(row, seen)

    # -- text -----------------------------------------------------------------------------
    def stream(self, prompt: str, config: GenerationConfig | None = None, **settings: Any
               ) -> Iterator[GeneratedToken]:
        """Tokens with their text as they come; ``settings`` are GenerationConfig fields."""
        config = config or GenerationConfig(**settings)
        ids = self.encode(prompt)
        decoder = StreamDecoder(self.tokenizer, ids)
        for token in self.generate_ids(ids, config):
            yield GeneratedToken(token, decoder.add(token))

    def generate(self, prompt: str, config: GenerationConfig | None = None, **settings: Any
                 ) -> GenerationResult:
        """The whole generation at once."""
        tokens = [t.id for t in self.stream(prompt, config, **settings)]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return GenerationResult(text, tokens, self.last_stats)

    def close(self) -> None:
        """Free the model's and the helpers' device memory."""
        self.ops.close()
        self.session.close()

    def __enter__(self) -> TextGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
