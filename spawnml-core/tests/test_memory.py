"""The size-class BufferPool: reuse by class, and a cache that never outgrows its cap."""

from __future__ import annotations

import itertools

import pytest

from spawnml.memory import BufferPool, size_class


class Allocator:
    """Counts real allocations and releases; handles are unique integers."""

    def __init__(self) -> None:
        self.ids = itertools.count()
        self.allocated: dict[int, int] = {}
        self.released: list[int] = []

    def allocate(self, nbytes: int) -> int:
        handle = next(self.ids)
        self.allocated[handle] = nbytes
        return handle

    def release(self, handle: int) -> None:
        self.released.append(handle)


def make_pool(cap: int = 1 << 20) -> tuple[BufferPool[int], Allocator]:
    alloc = Allocator()
    return BufferPool(alloc.allocate, alloc.release, max_cached_bytes=cap), alloc


@pytest.mark.parametrize("nbytes", [1, 255, 256, 257, 1000, 4096, 5000, 123_457, 1 << 30])
def test_size_class_covers_the_request_with_at_most_25_percent_slack(nbytes: int) -> None:
    cls = size_class(nbytes)
    assert cls >= nbytes
    assert cls <= max(256, nbytes * 1.25)
    assert size_class(cls) == cls  # a class is its own class


def test_freed_buffer_is_reused_for_a_request_of_the_same_class() -> None:
    pool, alloc = make_pool()
    handle, cls = pool.acquire(1000)
    pool.give_back(handle, cls)
    again, cls2 = pool.acquire(990)  # same class as 1000
    assert (again, cls2) == (handle, cls)
    assert len(alloc.allocated) == 1
    assert (pool.hits, pool.misses) == (1, 1)


def test_a_different_class_allocates_anew() -> None:
    pool, alloc = make_pool()
    handle, cls = pool.acquire(1000)
    pool.give_back(handle, cls)
    other, other_cls = pool.acquire(4000)
    assert other != handle and other_cls != cls
    assert len(alloc.allocated) == 2
    assert pool.cached_bytes == cls


def test_live_buffers_are_never_handed_out_twice() -> None:
    pool, _ = make_pool()
    handles = {pool.acquire(512)[0] for _ in range(10)}
    assert len(handles) == 10
    assert pool.live_bytes == 10 * size_class(512)


def test_cached_bytes_never_exceed_the_cap() -> None:
    cap = 64 << 10
    pool, alloc = make_pool(cap)
    held = [pool.acquire(n) for n in range(1000, 200_000, 3_001)]
    for handle, cls in held:
        pool.give_back(handle, cls)
        assert pool.cached_bytes <= cap
    assert alloc.released, "buffers beyond the cap must be released for real"
    assert pool.cached_bytes + sum(alloc.allocated[h] for h in alloc.released) == sum(
        cls for _, cls in held
    )
    assert pool.live_bytes == 0


def test_trim_releases_everything_cached() -> None:
    pool, alloc = make_pool()
    for handle, cls in [pool.acquire(n) for n in (300, 3000, 30000)]:
        pool.give_back(handle, cls)
    pool.trim()
    assert pool.cached_bytes == 0
    assert sorted(alloc.released) == sorted(alloc.allocated)
    pool.acquire(300)
    assert pool.misses == 4


def test_a_preferred_free_buffer_is_handed_out_before_the_others() -> None:
    pool, _ = make_pool()
    a, cls = pool.acquire(1000)
    b, _ = pool.acquire(1000)
    c, _ = pool.acquire(1000)
    for h in (a, b, c):
        pool.give_back(h, cls)
    assert pool.acquire(1000, prefer=a) == (a, cls)  # not the most recently freed, c
    assert pool.acquire(1000, prefer=12345) == (c, cls)  # not free: the usual choice
