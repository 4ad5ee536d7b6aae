"""The cpu backend's memory: numpy buffers through the shared size-class pool."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.backend import DeviceKind
from spawnml.errors import InvalidInputError
from spawnml.plugins import PluginManager
from spawnml_backend_cpu import CPUBackend


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"cpu"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [CPUBackend]


def test_always_available_on_the_host_cpu() -> None:
    info = CPUBackend.probe()
    assert info.available and info.device_kind is DeviceKind.CPU
    assert f"numpy {np.__version__}" in info.device


def test_upload_download_round_trip() -> None:
    cpu = CPUBackend()
    data = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    buffer = cpu.upload(data)
    assert buffer.nbytes == data.nbytes
    np.testing.assert_array_equal(cpu.download(buffer, (3, 5), "float32"), data)
    with pytest.raises(InvalidInputError, match="download of 64 bytes"):
        cpu.download(buffer, (4, 4), "float32")
    with pytest.raises(InvalidInputError, match="upload of 80 bytes"):
        cpu.upload(np.zeros(20, np.float32), buffer)


def test_freed_buffers_are_reused() -> None:
    cpu = CPUBackend()
    first = cpu.alloc(10_000)
    handle = first.handle
    cpu.free(first)
    cpu.free(first)  # a double free is ignored, not cached twice
    second, third = cpu.alloc(9_500), cpu.alloc(9_500)  # same size class as 10_000
    assert second.handle is handle
    assert third.handle is not handle
    assert (cpu.pool.hits, cpu.pool.misses) == (1, 2)


def test_the_pool_cannot_grow_without_bound() -> None:
    cpu = CPUBackend()
    assert 0 < cpu.pool.max_cached_bytes <= 1 << 30  # a finite default cap
    cap = cpu.pool.max_cached_bytes = 4 << 20  # smaller, to keep the test light
    sizes = [(i + 1) * (cap // 16) + 1 for i in range(24)]  # every one its own size class
    buffers = [cpu.alloc(n) for n in sizes]
    for buffer in buffers:
        cpu.free(buffer)
        assert cpu.pool.cached_bytes <= cap
    assert cpu.pool.cached_bytes > cap // 2  # it does cache, up to the cap
    cpu.close()
    assert cpu.pool.cached_bytes == 0
