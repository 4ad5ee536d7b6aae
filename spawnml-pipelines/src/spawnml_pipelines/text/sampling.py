"""Choosing the next token from logits: greedy, temperature, top-k, top-p, repetition penalty.

The semantics are those of Hugging Face ``generate``: the repetition penalty divides the
positive logits of tokens already seen (prompt included) and multiplies the negative ones;
then temperature, then top-k, then top-p (the smallest set of most likely tokens whose
probability reaches ``top_p``); a seeded numpy generator draws the token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from spawnml.errors import InvalidInputError


@dataclass(frozen=True)
class SamplingConfig:
    """``temperature`` 0 means greedy (the other settings but the penalty then do nothing)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (self.top_k >= 0, f"top_k must be >= 0 (0: off), got {self.top_k}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (self.repetition_penalty > 0,
             f"repetition_penalty must be > 0, got {self.repetition_penalty}"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidInputError(message)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def argmax_on_device(self) -> bool:
        """Greedy without a penalty: only the chosen token id needs to leave the device."""
        return self.greedy and self.repetition_penalty == 1.0


def apply_repetition_penalty(logits: np.ndarray, seen: Iterable[int], penalty: float
                             ) -> np.ndarray:
    """HF's penalty on the tokens in ``seen`` (a copy of ``logits``)."""
    out = np.array(logits, np.float32)
    ids = np.unique(np.fromiter(seen, np.int64))
    if penalty != 1.0 and ids.size:
        picked = out[ids]
        out[ids] = np.where(picked > 0, picked / penalty, picked * penalty)
    return out


def filter_top_k_top_p(scores: np.ndarray, top_k: int, top_p: float) -> np.ndarray:
    """``scores`` with every token outside the top-k / top-p set at -inf."""
    out = np.array(scores, np.float64)
    if 0 < top_k < out.size:
        kth = np.partition(out, -top_k)[-top_k]
        out[out < kth] = -np.inf
    if top_p < 1.0:
        order = np.argsort(-out, kind="stable")
        probs = _softmax(out[order])
        # keep a token while the probability before it is below top_p (the first always)
        keep = np.cumsum(probs) - probs < top_p
        out[order[~keep]] = -np.inf
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


class Sampler:
    """Picks tokens by a SamplingConfig; reproducible for a given seed."""

    def __init__(self, config: SamplingConfig) -> None:
        self.config = config
        self.rng = np.random.default_rng(config.seed)

    def __call__(self, logits: np.ndarray, seen: Iterable[int] = ()) -> int:
        c = self.config
        scores = apply_repetition_penalty(logits.reshape(-1), seen, c.repetition_penalty)
        if c.greedy:
            return int(np.argmax(scores))
        scores = filter_top_k_top_p(scores / c.temperature, c.top_k, c.top_p)
        return int(self.rng.choice(scores.size, p=_softmax(scores)))
