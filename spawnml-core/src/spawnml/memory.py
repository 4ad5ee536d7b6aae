"""A size-class buffer pool that every backend shares.

Freed buffers are kept by size class and handed out again for requests of the same class,
so a model's steady-state runs allocate nothing. The pool holds at most ``max_cached_bytes``
of free buffers; beyond that a freed buffer is released to the backend for real.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Generic, TypeVar

H = TypeVar("H")

_MIN_CLASS = 256


def size_class(nbytes: int) -> int:
    """Round ``nbytes`` up to its class: powers of two with four steps per octave."""
    if nbytes <= _MIN_CLASS:
        return _MIN_CLASS
    top = 1 << (nbytes - 1).bit_length()  # next power of two >= nbytes
    step = top // 8  # quarter steps between top/2 and top
    return -(-nbytes // step) * step


class BufferPool(Generic[H]):
    """Reuses freed buffers by size class; the backend supplies raw allocate/release."""

    def __init__(
        self,
        allocate: Callable[[int], H],
        release: Callable[[H], None],
        max_cached_bytes: int = 256 << 20,
    ) -> None:
        self._allocate = allocate
        self._release = release
        self.max_cached_bytes = max_cached_bytes
        self._free: dict[int, list[H]] = defaultdict(list)
        self.cached_bytes = 0
        self.live_bytes = 0
        self.hits = 0
        self.misses = 0

    def acquire(self, nbytes: int) -> tuple[H, int]:
        """A buffer of at least ``nbytes`` and its class size (reused when one is free)."""
        cls = size_class(max(nbytes, 1))
        bucket = self._free.get(cls)
        if bucket:
            self.hits += 1
            self.cached_bytes -= cls
            handle = bucket.pop()
        else:
            self.misses += 1
            handle = self._allocate(cls)
        self.live_bytes += cls
        return handle, cls

    def give_back(self, handle: H, cls: int) -> None:
        """Return a buffer; it is cached for reuse unless the cache is full."""
        self.live_bytes -= cls
        if self.cached_bytes + cls > self.max_cached_bytes:
            self._release(handle)
            return
        self._free[cls].append(handle)
        self.cached_bytes += cls

    def trim(self) -> None:
        """Release every cached free buffer."""
        for bucket in self._free.values():
            for handle in bucket:
                self._release(handle)
        self._free.clear()
        self.cached_bytes = 0
