"""TfIdfVectorizer: n-gram (and skip-gram) counts of int or string token sequences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, OpDef, TensorInfo

from .common import as_str

_MODES = ("TF", "IDF", "TFIDF")
_TOKEN_TYPES = (DType.string, DType.int32, DType.int64)


def ngram_table(counts: Sequence[int], pool: Sequence, indexes: Sequence[int],
                min_n: int, max_n: int) -> dict[tuple, int]:
    """n-gram (a tuple of tokens) -> output column, for sizes in [min_n, max_n]. The pool
    holds the 1-grams, then the 2-grams... starting at ``counts[n - 1]``; the k-th n-gram
    of the pool (over all sizes) writes column ``indexes[k]``; a repeated n-gram keeps its
    first column."""
    table: dict[tuple, int] = {}
    k = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        for i in range(start, end - size + 1, size):
            if min_n <= size <= max_n:
                table.setdefault(tuple(pool[i:i + size]), int(indexes[k]))
            k += 1
    return table


def count_row(row: Sequence, table: dict[tuple, int], min_n: int, max_n: int, max_skip: int,
              freq: np.ndarray) -> None:
    """Add the n-grams of one token row to ``freq``: sizes min_n..max_n with a gap of
    ``skip`` = 0..max_skip tokens between consecutive items (1-grams counted once)."""
    n_tokens = len(row)
    for skip in range(max_skip + 1):
        step = skip + 1
        for size in range(max(min_n, 1 if skip == 0 else 2), max_n + 1):
            span = (size - 1) * step
            for start in range(n_tokens - span):
                column = table.get(tuple(row[start:start + span + 1:step]))
                if column is not None:
                    freq[column] += 1


class TfIdfVectorizer(OpDef):
    """ONNX TfIdfVectorizer (opset 9): [C] -> [size] or [B, C] -> [B, size] float32, where
    size is ``max(ngram_indexes) + 1``; TF counts, IDF ``weights[j]`` (or 1) where the
    count is positive, TFIDF ``weights[j] * count``."""

    op_type = "TfIdfVectorizer"
    since_version = 9
    host_only = True

    def _config(self, node: Node, token: DType | None) -> dict:
        mode = self.attr(node, "mode", required=True)
        if mode not in _MODES:
            raise self.fail(node, f"mode must be one of {_MODES}, got {mode!r}")
        min_n = int(self.attr(node, "min_gram_length", required=True))
        max_n = int(self.attr(node, "max_gram_length", required=True))
        max_skip = int(self.attr(node, "max_skip_count", required=True))
        if not 1 <= min_n <= max_n or max_skip < 0:
            raise self.fail(node, f"need 1 <= min_gram_length ({min_n}) <= max_gram_length "
                                  f"({max_n}) and max_skip_count ({max_skip}) >= 0")
        counts = [int(c) for c in self.attr(node, "ngram_counts", required=True)]
        indexes = [int(i) for i in self.attr(node, "ngram_indexes", required=True)]
        ints, strs = self.attr(node, "pool_int64s"), self.attr(node, "pool_strings")
        if (ints is None) == (strs is None):
            raise self.fail(node, "exactly one of pool_int64s and pool_strings must be given")
        pool = [int(v) for v in ints] if ints is not None else [str(v) for v in strs]
        if token is not None and (token.is_string != (strs is not None)):
            raise self.fail(node, f"input of {token} tokens does not match a pool of "
                                  f"{'strings' if strs is not None else 'int64s'}")
        if not indexes or min(indexes) < 0:
            raise self.fail(node, "ngram_indexes must be non-empty and non-negative")
        weights = self.attr(node, "weights")
        return {"mode": mode, "min_n": min_n, "max_n": max_n, "max_skip": max_skip,
                "counts": counts, "indexes": indexes, "pool": pool, "size": max(indexes) + 1,
                "weights": None if weights is None or not len(weights)
                else np.asarray(weights, np.float64)}

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None:
            raise self.fail(node, "input X is required")
        if x.dtype not in _TOKEN_TYPES:
            raise self.fail(node, f"input X must be string, int32 or int64, got {x.dtype}")
        cfg = self._config(node, x.dtype)
        if x.shape is None:
            return [TensorInfo(DType.float32, None)]
        if len(x.shape) not in (1, 2):
            raise self.fail(node, f"input X must be [C] or [B, C], got shape {x.shape}")
        lead = x.shape[:1] if len(x.shape) == 2 else ()
        return [TensorInfo(DType.float32, (*lead, cfg["size"]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        x = as_str(x) if x.dtype.kind in "OUS" else x.astype(np.int64)
        cfg = self._config(node, DType.string if x.dtype == object else DType.int64)
        if x.ndim not in (1, 2):
            raise self.fail(node, f"input X must be [C] or [B, C], got shape {x.shape}")
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        table = ngram_table(cfg["counts"], cfg["pool"], cfg["indexes"],
                            cfg["min_n"], cfg["max_n"])
        freq = np.zeros((rows.shape[0], cfg["size"]), np.float64)
        for r, row in enumerate(rows):
            count_row(row.tolist(), table, cfg["min_n"], cfg["max_n"], cfg["max_skip"], freq[r])
        w = cfg["weights"]
        if cfg["mode"] == "IDF":
            freq = (freq > 0) * (w if w is not None else 1.0)
        elif cfg["mode"] == "TFIDF" and w is not None:
            freq = freq * w
        out = freq.astype(np.float32)
        return [out.reshape(-1) if x.ndim == 1 else out]

    def cases(self) -> list[OpCase]:
        ints = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
        attrs = {"mode": "TF", "min_gram_length": 1, "max_gram_length": 2,
                 "max_skip_count": 2, "ngram_counts": (0, 4),
                 "ngram_indexes": (0, 1, 2, 3, 4, 5, 6), "pool_int64s": (2, 3, 5, 4, 5, 6, 7, 8,
                                                                        6, 7)}
        words = np.array(["a", "b", "a", "c", "b"], dtype=object)
        sattrs = {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2,
                  "max_skip_count": 1, "ngram_counts": (0, 3), "ngram_indexes": (0, 1, 2, 3),
                  "pool_strings": ("a", "b", "c", "a", "b"), "weights": (0.5, 1.0, 2.0, 3.0)}
        return [
            OpCase("int_tf_skip", [ints], attrs),
            OpCase("int_idf", [ints[0]], {**attrs, "mode": "IDF"}),
            OpCase("string_tfidf", [words], sattrs),
        ]
