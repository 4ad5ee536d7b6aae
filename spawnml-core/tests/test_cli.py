"""The ``spawnml`` console script, run as a user runs it."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from spawnml.backend import DeviceKind

BUILTIN_BACKENDS = {"cpu", "opencl", "cuda", "webgpu", "webgl", "wasm"}
BUILTIN_PLUGINS = BUILTIN_BACKENDS | {"ops", "conformance", "pipelines"}
_RANK = {"gpu": 0, "cpu": 1, "emulated": 2, "none": 3}


def _has_nvidia_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def backends_json() -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNML_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-m", "spawnml", "backends", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", f"nothing should warn on a healthy install: {done.stderr}"
    return json.loads(done.stdout)


def test_backends_lists_all_six_builtin_backends(backends_json) -> None:
    names = [b["name"] for b in backends_json]
    assert BUILTIN_BACKENDS <= set(names), names
    assert len(names) == len(set(names))
    for b in backends_json:
        if b["name"] in BUILTIN_BACKENDS:
            assert b["plugin"] == b["name"]
        if b["available"]:
            assert b["device"] and b["device_kind"] != "none" and not b["reason"], b
        else:
            assert b["reason"] and b["device_kind"] == "none", b
    cpu = next(b for b in backends_json if b["name"] == "cpu")
    assert cpu["available"] and cpu["device_kind"] == DeviceKind.CPU.value


def test_backends_come_in_preference_order(backends_json) -> None:
    ranks = [_RANK[b["device_kind"]] for b in backends_json]
    assert ranks == sorted(ranks)


@pytest.mark.skipif(_has_nvidia_driver(), reason="this machine has an NVIDIA driver")
def test_cuda_without_a_driver_says_why(backends_json) -> None:
    cuda = next(b for b in backends_json if b["name"] == "cuda")
    assert not cuda["available"]
    assert cuda["reason"].startswith("libcuda.so.1 not found: no NVIDIA driver")
    assert "NVRTC" in cuda["reason"]


def test_expected_backends_are_available(backends_json) -> None:
    """CI names the backends its machine must run (SPAWNML_EXPECT_BACKENDS=cpu,opencl,...)."""
    expected = {n for n in os.environ.get("SPAWNML_EXPECT_BACKENDS", "cpu").split(",") if n}
    missing = {
        b["name"]: b["reason"]
        for b in backends_json
        if b["name"] in expected and not b["available"]
    }
    assert not missing, f"expected available, but: {missing}"
    assert expected <= {b["name"] for b in backends_json}


def test_backends_table(run_cli) -> None:
    done = run_cli("backends", env={"SPAWNML_PLUGINS": "cpu,cuda"})
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["backend", "available", "kind", "device", "reason"]
    assert [r.split()[:3] for r in rows] == [["cpu", "yes", "cpu"], ["cuda", *rows[1].split()[1:3]]]


def test_spawnml_plugins_cpu_shows_only_cpu(run_cli) -> None:
    done = run_cli("backends", "--json", env={"SPAWNML_PLUGINS": "cpu"})
    assert done.returncode == 0, done.stderr
    assert [b["name"] for b in json.loads(done.stdout)] == ["cpu"]
    done = run_cli("plugins", "--json", env={"SPAWNML_PLUGINS": "cpu"})
    assert [p["name"] for p in json.loads(done.stdout)] == ["cpu"]


def test_plugins_lists_every_builtin_plugin_loaded(run_cli) -> None:
    done = run_cli("plugins", "--json")
    assert done.returncode == 0, done.stderr
    records = {p["name"]: p for p in json.loads(done.stdout)}
    assert BUILTIN_PLUGINS <= set(records)
    for name in BUILTIN_PLUGINS:
        record = records[name]
        assert record["loaded"] and not record["error"], record
        assert record["version"] == metadata.version(record["distribution"])
    assert records["cpu"]["hooks"] == ["spawnml_register_backends", "spawnml_register_kernels"]
    table = run_cli("plugins").stdout
    assert "spawnml-backend-webgl" in table and "ok" in table


def test_version(run_cli) -> None:
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"spawnml {metadata.version('spawnml-core')}"


def test_no_command_prints_help(run_cli) -> None:
    done = run_cli(env={"SPAWNML_PLUGINS": "cpu"})
    assert done.returncode == 0
    assert "backends" in done.stdout and "plugins" in done.stdout


def test_loading_plugins_imports_no_native_library() -> None:
    code = (
        "import sys; from spawnml.plugins import get_plugin_manager; get_plugin_manager(); "
        "print(sorted(m for m in ('wgpu', 'pyopencl', 'moderngl', 'wasmtime', 'pycuda', "
        "'cuda.bindings') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
