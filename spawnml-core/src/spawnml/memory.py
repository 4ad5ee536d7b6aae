"""A size-class buffer pool that every backend shares.

Freed buffers are kept by size class and handed out again for requests of the same class,
so a model's steady-state runs allocate nothing. The pool holds at most ``max_cached_bytes``
of free buffers; beyond that a freed buffer is released to the backend for real.

``tensor_byte_limit`` and ``check_tensor_bytes`` refuse, with OutOfMemoryError, a tensor
larger than the memory there is, before numpy or a device driver tries to allocate it;
``host_memory_errors`` turns an allocation the host refused anyway into the same error.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from .errors import InvalidInputError, OutOfMemoryError

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

    def acquire(self, nbytes: int, prefer: H | None = None) -> tuple[H, int]:
        """A buffer of at least ``nbytes`` and its class size (reused when one is free:
        ``prefer`` itself when it is among the free ones, e.g. the buffer a caller had
        last time, so that a loop alternating between buffers keeps the same ones)."""
        cls = size_class(max(nbytes, 1))
        bucket = self._free.get(cls)
        if bucket:
            self.hits += 1
            self.cached_bytes -= cls
            at = next((i for i in range(len(bucket) - 1, -1, -1) if bucket[i] is prefer), -1)
            handle = bucket.pop(at)
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


# -- the per-tensor limit ------------------------------------------------------------------

MAX_TENSOR_BYTES_ENV = "SPAWNML_MAX_TENSOR_BYTES"
_MEMINFO = "/proc/meminfo"


def available_host_bytes() -> int | None:
    """Memory the host can still give without swapping (``MemAvailable`` of /proc/meminfo,
    else the free physical pages); None where the platform does not say."""
    try:
        with open(_MEMINFO, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _parse_limit(text: str) -> int | None:
    """An env value: a byte count (``0``, ``off``, ``none``: no limit)."""
    value = text.strip().lower()
    if value in ("", "0", "off", "none", "no"):
        return None
    try:
        limit = int(float(value))
    except ValueError:
        raise InvalidInputError(
            f"{MAX_TENSOR_BYTES_ENV}={text!r} is not a byte count (or 0/off for no limit)"
        ) from None
    if limit < 0:
        raise InvalidInputError(f"{MAX_TENSOR_BYTES_ENV}={text!r} must not be negative")
    return limit


def tensor_byte_limit(override: int | None = None) -> int | None:
    """The largest tensor a session may allocate, in bytes; None means no limit.

    ``override`` (``SessionOptions.max_tensor_bytes``) wins: a positive byte count, or 0 for
    no limit. Else ``SPAWNML_MAX_TENSOR_BYTES`` (the same values, ``off`` too). Else the
    host's available memory now: a larger tensor cannot be computed on the host, and
    devices read results back into host memory."""
    if override is not None:
        return int(override) or None
    env = os.environ.get(MAX_TENSOR_BYTES_ENV)
    if env is not None:
        return _parse_limit(env)
    return available_host_bytes()


def _human(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def check_tensor_bytes(nbytes: int, limit: int | None, what: str) -> None:
    """Raise OutOfMemoryError when ``what`` (a tensor's description) needs more than
    ``limit`` bytes, before anything tries to allocate it."""
    if limit is not None and nbytes > limit:
        raise OutOfMemoryError(
            f"{what} needs {nbytes} bytes ({_human(nbytes)}), more than the {_human(limit)} "
            f"a tensor may take here (the host's available memory, or "
            f"SessionOptions.max_tensor_bytes / {MAX_TENSOR_BYTES_ENV})"
        )


@contextmanager
def host_memory_errors(what: str) -> Iterator[None]:
    """Raise OutOfMemoryError, naming ``what``, where numpy (or Python) could not allocate:
    a bare MemoryError says nothing about which tensor or model asked for the memory."""
    try:
        yield
    except OutOfMemoryError:
        raise
    except MemoryError as exc:
        raise OutOfMemoryError(f"{what}: the host refused an allocation ({exc})") from exc
