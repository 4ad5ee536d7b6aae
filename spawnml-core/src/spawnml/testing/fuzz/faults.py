"""Deliberately broken spawnml runners that check the fuzzer's own machinery.

Each has the ``oracle.SpawnRunner`` signature and stands in for ``oracle.run_spawnml`` in a
``workers.Task``: the tests (and ``scripts/fuzz.py --selftest``) expect ``raise_foreign`` to
be classified ``foreign``, ``abort`` ``crash``, ``sleep`` ``hang``, ``raise_spawnml_error``
``refused-valid`` on a valid model, ``off_by_one`` and ``write_feeds`` ``mismatch``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ...errors import InvalidModelError
from .oracle import Feeds, run_onnxruntime


def raise_foreign(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """Raise an exception that is not a SpawnMLError."""
    raise KeyError("deliberately foreign")


def raise_spawnml_error(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """Refuse every model with a SpawnMLError."""
    raise InvalidModelError("deliberately refused")


def abort(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """Kill the worker with SIGABRT, as a native library's assertion would."""
    os.abort()


def sleep(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """Never return (within any sane timeout)."""
    time.sleep(3600)
    return []


def off_by_one(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """onnxruntime's outputs, plus one where they are floats."""
    outputs = [o + 1 if o.dtype.kind == "f" else o for o in run_onnxruntime(model, feeds)]
    return [outputs, outputs]


def write_feeds(model: bytes, feeds: Feeds, backend: str) -> list[list[np.ndarray]]:
    """Correct outputs, but the caller's feed arrays are overwritten afterwards."""
    outputs = run_onnxruntime(model, feeds)
    for value in feeds.values():
        value[...] = 0
    return [outputs]
