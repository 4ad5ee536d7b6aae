"""`spawnml info`, `spawnml run` and `spawnml bench` on a small model (in process)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from graph_helpers import chain_model

from spawnml import get_available_backends
from spawnml.cli import main


@pytest.fixture
def model_path(tmp_path) -> str:
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain_model(shape=(8, 4)).SerializeToString())
    return str(path)


def test_info(model_path: str, capsys) -> None:
    assert main(["info", model_path, "--backends", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "x     tensor(float)  [8, 4]" in out
    assert "ai.onnx=17" in out
    assert "Relu  3" in out and "Add   1" in out and "Sub   1" in out
    assert "memory on cpu: planned peak" in out


def test_run_with_input_file_compare_and_benchmark(model_path: str, tmp_path, capsys) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.ones((8, 4), np.float32))
    assert main(["run", model_path, "--backend", "cpu", "--input", f"x={x}",
                 "--compare", "cpu", "--benchmark", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "y       float32  (8, 4)" in out
    assert "max abs err" in out and "y       0            0" in out
    assert "median" in out and "p90" in out and "planned peak memory" in out


def test_run_reports_a_bad_input_name(model_path: str, tmp_path, capsys) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.ones((8, 4), np.float32))
    assert main(["run", model_path, "--backend", "cpu", "--input", f"nope={x}"]) == 1
    assert "the model has no input 'nope' (inputs: x)" in capsys.readouterr().err


def test_bench_writes_json(model_path: str, tmp_path, capsys) -> None:
    report = tmp_path / "bench.json"
    assert main(["bench", model_path, "--backends", "cpu", "--against", "cpu", "--runs", "2",
                 "--json", str(report)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "geometric mean time ratio cpu/cpu" in out
    data = json.loads(report.read_text())
    assert data["results"][0]["median_ms"]["cpu"] > 0


def test_run_profile_prints_a_table_and_writes_json(model_path: str, tmp_path, capsys) -> None:
    report = tmp_path / "profile.json"
    assert main(["run", model_path, "--backend", "cpu", "--profile", "3",
                 "--json", str(report)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "profile (3 runs after the first" in out
    assert "launches per run 5; model nodes 5" in out  # cpu kernels: one launch per node
    assert "replayed from a recorded plan: 3" in out
    assert "host" in out and "device" in out and "device time on cpu: synchronous" in out
    data = json.loads(report.read_text())
    assert data["runs"] == 3 and data["model_nodes"] == 5 and data["launches_per_run"] == 5
    device = [k for k in data["kernels"] if k["kind"] in ("launch", "kernel")]
    assert sorted(n for k in device for n in k["nodes"]) == sorted(
        ["Sub_0", "Relu_1", "Relu_2", "Relu_3", "Add_4"]
    )
    assert all(k["count"] == 3 and k["backend"] == "cpu" for k in device)


@pytest.mark.parametrize("backend", ["wasm", "opencl", "webgpu"])
def test_profile_lists_every_node_of_a_fused_kernel(model_path: str, backend: str, tmp_path,
                                                    capsys) -> None:  # fmt: skip
    if backend not in get_available_backends():
        pytest.skip(f"{backend} is not available")
    report = tmp_path / "profile.json"
    assert main(["run", model_path, "--backend", backend, "--profile", "2",
                 "--json", str(report)]) == 0  # fmt: skip
    data = json.loads(report.read_text())
    launched = [k for k in data["kernels"] if k["kind"] == "launch"]
    assert sum(k["count"] for k in launched) == data["launches"] == 2 * data["launches_per_run"]
    nodes = [n for k in launched for n in k["nodes"]]
    assert sorted(nodes) == sorted(["Sub_0", "Relu_1", "Relu_2", "Relu_3", "Add_4"])
    if any(len(k["nodes"]) > 1 for k in launched):  # graph-level fusion on
        assert data["launches_per_run"] < data["model_nodes"] == 5
