"""The OpenCL runtime: compile errors, caches, queued work, memory, capabilities."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import KernelCompileError, OutOfMemoryError
from spawnml.kernel import Output, Tensor, kernel
from spawnml.kernel.disk_cache import KernelDiskCache
from spawnml_backend_opencl import OpenCLBackend, runtime


@kernel
def twice(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0


def test_a_broken_kernel_raises_with_the_compiler_log(opencl: OpenCLBackend) -> None:
    source = "__kernel void k_bad(__global float *out) { out[0] = undefined_thing; }"
    with pytest.raises(KernelCompileError) as info:
        opencl.program_from_source(source, "k_bad", 1, 0)
    assert "undefined_thing" in info.value.log
    assert "undeclared identifier" in info.value.log
    assert info.value.source == source


def test_programs_are_cached_in_memory(opencl: OpenCLBackend) -> None:
    spec = twice.specialize([((7,), "float32")], ((7,), "float32"))
    assert opencl.compile(spec) is opencl.compile(spec)


def test_program_binaries_are_cached_on_disk(opencl, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPAWNML_CACHE_DIR", str(tmp_path))
    disk = KernelDiskCache("opencl", "bin")
    monkeypatch.setattr(runtime, "_disk", disk)
    source = opencl.renderer.render(twice.specialize([((9,), "float32")], ((9,), "float32")))
    opencl.program_from_source(source, "k_twice", 9, 1)
    files = list((tmp_path / "kernels" / "opencl").glob("*.bin"))
    assert len(files) == 1 and files[0].stat().st_size > 0

    hits = []
    monkeypatch.setattr(disk, "get", lambda *key: hits.append(key) or files[0].read_bytes())
    program = opencl.program_from_source(source, "k_twice", 9, 1)  # built from the binary
    assert len(hits) == 1
    x = np.arange(9, dtype=np.float32)
    buf_x, out = opencl.upload(x), opencl.alloc(36)
    opencl.launch(program, out, [buf_x])
    np.testing.assert_array_equal(opencl.download(out, (9,), "float32"), x * 2)


def test_chained_launches_run_in_order_without_waiting(opencl: OpenCLBackend) -> None:
    n = 1 << 16
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    spec = twice.specialize([((n,), "float32")], ((n,), "float32"))
    program = opencl.compile(spec)
    a = opencl.upload(x)
    x[:] = 0  # the upload copied a snapshot: changing the host array now has no effect
    b, c = opencl.alloc(4 * n), opencl.alloc(4 * n)
    opencl.launch(program, b, [a])
    opencl.launch(program, c, [b])
    got = opencl.download(c, (n,), "float32")
    ref = np.random.default_rng(0).standard_normal(n).astype(np.float32) * 4
    np.testing.assert_array_equal(got, ref)
    for buf in (a, b, c):
        opencl.free(buf)


def test_freed_buffers_are_reused(opencl: OpenCLBackend) -> None:
    buf = opencl.alloc(1000)
    handle = buf.handle
    opencl.free(buf)
    again = opencl.alloc(1000)
    assert again.handle is handle
    opencl.free(again)


def test_capabilities_are_read_from_the_device(opencl: OpenCLBackend) -> None:
    caps = opencl.capabilities
    device = opencl._rt.device
    assert caps.max_buffer_bytes == device.max_mem_alloc_size
    assert caps.float16_arithmetic == ("cl_khr_fp16" in device.extensions)
    assert DType.int64 in caps.dtypes and DType.float16 in caps.dtypes
    assert opencl.storage_dtype(DType.bool) is DType.uint8
    with pytest.raises(OutOfMemoryError, match="exceeds this device's limit"):
        opencl.alloc(caps.max_buffer_bytes + 1)


@pytest.mark.parametrize("dt", ["int64", "float16", "int8", "uint16", "bool"])
def test_stored_dtypes_round_trip(opencl: OpenCLBackend, dt: str) -> None:
    """Every declared dtype (and bool, stored as uchar) survives upload/download exactly."""
    values = {
        "int64": np.array([-(2**62), 2**40 + 3, -1, 0], np.int64),
        "float16": np.array([65504, -0.0, np.inf, 6e-8], np.float16),
        "int8": np.array([-128, 127, 0, -1], np.int8),
        "uint16": np.array([0, 65535, 7, 300], np.uint16),
        "bool": np.array([True, False, True, True]),
    }[dt]
    buf = opencl.upload(values)
    np.testing.assert_array_equal(opencl.download(buf, values.shape, dt), values)
    opencl.free(buf)
