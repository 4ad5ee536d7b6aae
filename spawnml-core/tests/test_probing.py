"""Helpers shared by backend probes."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from spawnml.backend import BackendInfo, DeviceKind
from spawnml.probing import (
    available,
    cached_probe,
    cpu_model,
    ensure_xdg_runtime_dir,
    gpu_or_emulated,
    import_failure,
    unavailable,
)


def test_cached_probe_runs_once_and_never_raises() -> None:
    calls = []

    @cached_probe("demo")
    def probe() -> BackendInfo:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("device vanished")
        return available("demo", "a device", DeviceKind.GPU)

    first = probe()
    assert first == unavailable("demo", "probe failed: OSError: device vanished")
    assert probe() is first and len(calls) == 1
    probe.cache_clear()
    assert probe().available and len(calls) == 2


def test_import_failure_tells_missing_from_broken() -> None:
    try:
        import spawnml_no_such_library  # noqa: F401
    except ImportError as exc:
        assert import_failure(exc, "spawnml_no_such_library") == (
            "spawnml_no_such_library is not installed"
        )
    # installed, but one of its own dependencies is missing
    missing_dep = ModuleNotFoundError("No module named 'cffi'", name="cffi")
    assert import_failure(missing_dep, "wgpu") == "wgpu failed to import: No module named 'cffi'"
    broken = ImportError("libOpenCL.so.1: cannot open shared object file")
    assert import_failure(broken, "pyopencl").startswith("pyopencl failed to import: libOpenCL")


@pytest.mark.parametrize(
    ("descriptions", "cpu_device", "kind"),
    [
        (("llvmpipe (LLVM 15.0.6, 256 bits)",), False, DeviceKind.EMULATED),
        (("Google SwiftShader",), False, DeviceKind.EMULATED),
        (("NVIDIA H200", "NVIDIA CUDA"), False, DeviceKind.GPU),
        (("AMD Radeon RX 7900",), False, DeviceKind.GPU),
        (("pthread-skylake", "Portable Computing Language"), True, DeviceKind.EMULATED),
    ],
)
def test_device_kind(descriptions: tuple[str, ...], cpu_device: bool, kind: DeviceKind) -> None:
    assert gpu_or_emulated(*descriptions, is_cpu_device=cpu_device) is kind


def test_cpu_model_names_something() -> None:
    assert cpu_model().strip()


def test_xdg_runtime_dir_is_made_private_when_unset(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ensure_xdg_runtime_dir()
    path = Path(os.environ["XDG_RUNTIME_DIR"])
    assert path.parent == tmp_path and path.is_dir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_xdg_runtime_dir_is_left_alone_when_valid(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    ensure_xdg_runtime_dir()
    assert os.environ["XDG_RUNTIME_DIR"] == str(tmp_path)
