"""The reference for tests and benchmarks: a greedy loop driven by onnxruntime directly
(the cache grown by one position per step on the host, as optimum does), independent of
spawnml's session, cache window and helpers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .generator import GenerationStats
from .layout import PAST_PATTERN, PRESENT_PATTERN


def ort_greedy(model: Path, prompt: Sequence[int], max_tokens: int, *,
               head_dim: int | None = None, threads: int = 0
               ) -> tuple[list[int], GenerationStats]:
    """Greedy token ids from onnxruntime (CPU), and its prefill/decode times."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    past = sorted((n for n in inputs if PAST_PATTERN.match(n)), key=_layer_key)
    present = sorted((o.name for o in sess.get_outputs() if PRESENT_PATTERN.match(o.name)),
                     key=_layer_key)
    shape = inputs[past[0]].shape
    dim = shape[3] if isinstance(shape[3], int) else head_dim
    cache = {n: np.zeros((1, shape[1], 0, dim), np.float32) for n in past}
    stats = GenerationStats(prompt_tokens=len(prompt))
    ids, tokens, total = list(prompt), [], 0
    for step in range(max_tokens):
        start = time.perf_counter()
        feeds = {"input_ids": np.array([ids], np.int64), **cache}
        if "attention_mask" in inputs:
            feeds["attention_mask"] = np.ones((1, total + len(ids)), np.int64)
        if "position_ids" in inputs:
            feeds["position_ids"] = np.arange(total, total + len(ids), dtype=np.int64)[None]
        logits, *kv = sess.run(["logits", *present], feeds)
        total += len(ids)
        cache = dict(zip(past, kv, strict=True))
        ids = [int(np.argmax(logits[0, -1]))]
        tokens.append(ids[0])
        took = time.perf_counter() - start
        if step == 0:
            stats.prefill_s = took
        else:
            stats.decode_s += took
    stats.new_tokens = len(tokens)
    return tokens, stats


def _layer_key(name: str) -> tuple[int, int]:
    m = PAST_PATTERN.match(name) or PRESENT_PATTERN.match(name)
    assert m is not None
    return int(m.group(1)), 0 if m.group(2) == "key" else 1
