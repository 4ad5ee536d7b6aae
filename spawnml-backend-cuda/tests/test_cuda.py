"""The cuda plugin and probe; the driver calls run against a fake libcuda built here."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

import spawnml_backend_cuda.probe as probe_module
from spawnml.backend import DeviceKind
from spawnml.errors import BackendUnavailableError
from spawnml.pending import PendingRuntime
from spawnml.plugins import PluginManager
from spawnml_backend_cuda import CUDABackend, driver
from spawnml_backend_cuda.driver import CudaDevice
from spawnml_backend_cuda.probe import probe

# The driver API entry points the probe calls, with canned answers (CUresult 0 = success).
FAKE_LIBCUDA = r"""
#include <stddef.h>
#include <string.h>
static int retained = 0;
int cuInit(unsigned int flags) { return FAIL_INIT ? 100 : 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { *n = DEVICES; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetName(char *name, int len, int dev) { strncpy(name, "Fake H200", len); return 0; }
int cuDeviceGetAttribute(int *v, int attr, int dev) {
    *v = attr == 75 ? 9 : attr == 76 ? 0 : -1; return 0; }
int cuDeviceTotalMem_v2(size_t *bytes, int dev) { *bytes = (size_t)141 << 30; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { retained++; *ctx = &retained; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { retained--; return 0; }
int cuGetErrorName(int err, const char **name) {
    if (err != 100) return 1;
    *name = "CUDA_ERROR_NO_DEVICE"; return 0; }
int fake_retained(void) { return retained; }
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory):
    """Build a fake libcuda variant: ``fake_libcuda(fail_init=0, devices=2)`` → its path."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libcuda")
    folder = tmp_path_factory.mktemp("fake-cuda")
    source = folder / "libcuda.c"
    source.write_text(FAKE_LIBCUDA)

    def build(fail_init: int = 0, devices: int = 2) -> str:
        out = folder / f"libcuda-{fail_init}-{devices}.so"
        if not out.exists():
            subprocess.run(
                [cc, "-shared", "-fPIC", f"-DFAIL_INIT={fail_init}", f"-DDEVICES={devices}",
                 "-o", str(out), str(source)],
                check=True,
            )  # fmt: skip
        return str(out)

    return build


@pytest.fixture
def reprobe():
    probe.cache_clear()
    yield probe
    probe.cache_clear()


def test_registers_through_its_entry_point() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"cuda"})
    found: list[type] = []
    pm.hook.spawnml_register_backends(register=found.append)
    assert found == [CUDABackend]


def test_describes_the_first_device_and_releases_its_context(fake_libcuda) -> None:
    lib = ctypes.CDLL(fake_libcuda())
    device = driver.first_device(lib)
    assert device == CudaDevice("Fake H200", (9, 0), 141 << 30, 13000, 2)
    assert device.describe() == "Fake H200 (compute 9.0, 141 GiB, driver CUDA 13.0, 2 devices)"
    assert lib.fake_retained() == 0


def test_driver_errors_are_named(fake_libcuda) -> None:
    with pytest.raises(BackendUnavailableError, match=r"^cuInit failed: CUDA_ERROR_NO_DEVICE$"):
        driver.first_device(ctypes.CDLL(fake_libcuda(fail_init=1)))
    with pytest.raises(BackendUnavailableError, match="found no CUDA device"):
        driver.first_device(ctypes.CDLL(fake_libcuda(devices=0)))


def test_a_device_without_pycuda_is_unavailable(fake_libcuda, reprobe, monkeypatch) -> None:
    monkeypatch.setattr(driver, "LIBCUDA", fake_libcuda())
    monkeypatch.setattr(probe_module, "pycuda_installed", lambda: False)
    info = reprobe()
    assert not info.available
    assert info.reason.startswith("found Fake H200 (compute 9.0")
    assert "pip install 'spawnml-backend-cuda[gpu]'" in info.reason


def test_a_device_with_pycuda_is_an_available_gpu(fake_libcuda, reprobe, monkeypatch) -> None:
    monkeypatch.setattr(driver, "LIBCUDA", fake_libcuda())
    monkeypatch.setattr(probe_module, "pycuda_installed", lambda: True)
    info = reprobe()
    assert info.available and info.device_kind is DeviceKind.GPU
    assert info.device.startswith("Fake H200 (compute 9.0, 141 GiB")


def test_no_driver_says_so_and_tells_whether_nvrtc_works(reprobe, monkeypatch) -> None:
    monkeypatch.setattr(driver, "LIBCUDA", str(Path("/nonexistent/libcuda.so.1")))
    info = reprobe()
    assert not info.available and info.device_kind is DeviceKind.NONE
    assert info.reason.startswith("/nonexistent/libcuda.so.1 not found: no NVIDIA driver (")
    # cuda-bindings and nvidia-cuda-nvrtc are this package's dependencies
    version = probe_module.nvrtc_version()
    assert version is not None and int(version.split(".")[0]) >= 12
    assert f"NVRTC {version} is installed: CUDA kernels can still be compile-checked" in info.reason


@pytest.mark.skipif(not issubclass(CUDABackend, PendingRuntime), reason="the runtime has landed")
def test_a_pending_runtime_says_so_instead_of_faking() -> None:
    with pytest.raises(BackendUnavailableError, match=r"cuda runtime is not implemented yet"):
        CUDABackend()
