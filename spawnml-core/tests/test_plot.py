"""spawnml.plot: the bars of bench and profile figures (numbers checked without images),
PNGs of the promised pixel size, a clear error without matplotlib, and the README script."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession
from spawnml.errors import MissingDependencyError, SpawnMLError
from spawnml.plot import (
    bench_bars,
    contenders,
    plot_bench,
    plot_profile,
    profile_bars,
    require_matplotlib,
)
from spawnml.profile import KernelRow, Profile

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

BENCH = {
    "results": [
        {"model": "squeezenet1_1",
         "median_ms": {"onnxruntime": 2.0, "cpu": 5.0, "opencl": 30.0, "wasm": 1400.0},
         "errors": {"webgpu": "BackendError: device lost"}},
        {"model": "mobilenetv2",
         "median_ms": {"onnxruntime": 4.0, "cpu": 2.0, "opencl": 52.0, "webgpu": 80.0,
                       "wasm": 2800.0},
         "errors": {}},
        {"model": "resnet50", "median_ms": {"cpu": 90.0},
         "errors": {"onnxruntime": "RuntimeError: no model", "opencl": "x", "webgpu": "y",
                    "wasm": "z"}},
    ],
    "geomean_ratio": {"cpu": 1.0, "opencl": 14.0, "webgpu": 20.0, "wasm": 700.0},
    "against": "onnxruntime",
}  # fmt: skip


def _bars(data: dict) -> dict[tuple[str, str], object]:
    return {(b.group, b.label): b for b in bench_bars(data)}


def test_bench_bars_are_time_ratios_to_the_peer_with_failures_kept() -> None:
    assert contenders(BENCH) == ["cpu", "opencl", "webgpu", "wasm"]  # the peer is no bar
    bars = _bars(BENCH)
    assert len(bars) == 3 * 4
    expected = {
        ("squeezenet1_1", "cpu"): 2.5, ("squeezenet1_1", "opencl"): 15.0,
        ("squeezenet1_1", "wasm"): 700.0, ("mobilenetv2", "cpu"): 0.5,
        ("mobilenetv2", "opencl"): 13.0, ("mobilenetv2", "webgpu"): 20.0,
        ("mobilenetv2", "wasm"): 700.0,
    }  # fmt: skip
    for key, ratio in expected.items():
        assert not bars[key].failed and bars[key].value == pytest.approx(ratio), key
    failed = {key for key, bar in bars.items() if bar.failed}
    assert failed == {("squeezenet1_1", "webgpu")} | {("resnet50", b) for b in contenders(BENCH)}
    assert bars[("squeezenet1_1", "webgpu")].note == "BackendError: device lost"
    # cpu ran on resnet50, but without the peer's time there is no ratio
    assert "RuntimeError: no model" in bars[("resnet50", "cpu")].note
    assert all(math.isnan(bars[key].value) for key in failed)


def test_bench_bars_without_a_peer_are_milliseconds() -> None:
    data = copy.deepcopy(BENCH)
    data["against"], data["geomean_ratio"] = None, {}
    assert contenders(data)[0] == "onnxruntime"  # an ordinary contender now
    bars = _bars(data)
    assert bars[("squeezenet1_1", "wasm")].value == 1400.0
    assert bars[("resnet50", "cpu")].value == 90.0 and not bars[("resnet50", "cpu")].failed
    assert bars[("resnet50", "onnxruntime")].failed


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _five_models() -> dict:
    data = copy.deepcopy(BENCH)
    for i in range(2):
        data["results"].append({**data["results"][1], "model": f"copy{i}"})
    return data


@pytest.mark.parametrize(("data", "size"), [(BENCH, (660, 495)), (_five_models(), (880, 495))],
                         ids=["3 models", "5 models"])  # fmt: skip
def test_plot_bench_writes_a_png_of_the_promised_size(tmp_path: Path, data: dict, size) -> None:
    pytest.importorskip("matplotlib")
    had_pyplot = "matplotlib.pyplot" in sys.modules
    out = plot_bench(data, tmp_path / "sub" / "bench.png")
    assert out == tmp_path / "sub" / "bench.png"
    assert _png_size(out) == size  # (max(6, 1.6 * models), 4.5) inches at 110 dpi
    assert had_pyplot or "matplotlib.pyplot" not in sys.modules  # no pyplot state
    no_peer = {**data, "against": None, "geomean_ratio": {}}
    assert _png_size(plot_bench(no_peer, tmp_path / "no_peer.png")) == size


def _profiled(runs: int = 2) -> Profile:
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(6):
        w = rng.standard_normal((8, 8)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        prev = "y" if i == 5 else f"h{i}"
        nodes.append(helper.make_node("Sigmoid", [f"m{i}"], [prev], name=f"act{i}"))
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with InferenceSession(model, ["cpu"]) as sess:
        return sess.profile({"x": rng.standard_normal((2, 8)).astype(np.float32)}, runs=runs)


def test_profile_bars_sum_to_the_kernel_time_and_stop_at_the_limit() -> None:
    prof = _profiled(runs=2)
    total_ms = sum(r.call_s + r.device_s for r in prof.rows) / prof.runs * 1e3
    every = profile_bars(prof, limit=10_000)
    assert "other" not in {b.group for b in every} and {b.group for b in every} == {"cpu"}
    assert 12 <= len(every) <= len(prof.rows)  # 12 nodes, the runs' rows of a kernel merged
    assert math.fsum(b.value for b in every) == pytest.approx(total_ms, rel=1e-9)
    values = [b.value for b in every]
    assert values == sorted(values, reverse=True) and min(values) > 0
    assert any(b.label == "mm0 (MatMul)" for b in every)
    limited = profile_bars(prof, limit=3)
    assert limited[:3] == every[:3] and len(limited) == 4
    assert limited[3].label == f"other {len(every) - 3} kernels" and limited[3].group == "other"
    assert limited[3].value == pytest.approx(math.fsum(values[3:]))
    assert profile_bars(json.loads(prof.json()), limit=3) == limited  # saved profiles too


def test_profile_bars_merge_one_kernels_rows_and_label_fused_ones() -> None:
    prof = Profile(model_nodes=3, runs=2, run_s=0.010)
    fused = dict(nodes=["conv", "relu"], op_types=["Conv", "Relu"], backend="opencl",
                 kernel="conv_relu", kind="launch")  # fmt: skip
    prof.rows = [
        KernelRow(**fused, count=1, call_s=0.001, device_s=0.002),  # normal run
        KernelRow(["x -> opencl"], ["upload"], "opencl", "", "upload", 2, 0.0005, 0.0),
        KernelRow(**fused, count=1, call_s=0.0, device_s=0.003),  # replayed run
        KernelRow(["det"], ["Det"], "host", "", "host", 2, 0.001, 0.0),
    ]
    bars = profile_bars(prof, limit=1)
    assert [(b.label, b.group) for b in bars] == [
        ("conv_relu: conv +1 (Conv+Relu)", "opencl"), ("other 2 kernels", "other"),
    ]  # fmt: skip
    assert bars[0].value == pytest.approx(3.0) and bars[1].value == pytest.approx(0.75)
    assert [b.label for b in profile_bars(prof, limit=5)][1:] == [
        "det (Det)",
        "x -> opencl (upload)",
    ]


def test_plot_profile_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    prof = _profiled(runs=2)
    out = plot_profile(prof, tmp_path / "profile.png", limit=4)
    # 8 inches wide, max(3, 0.28 * bars + 1.6) high, at 110 dpi: 5 bars need 3 inches
    assert _png_size(out) == (880, 330)
    assert _png_size(plot_profile(prof, tmp_path / "all.png", limit=100)) == (
        880, round((0.28 * len(profile_bars(prof, 100)) + 1.6) * 110))  # fmt: skip


def test_plots_without_matplotlib_name_the_extra(tmp_path: Path, monkeypatch) -> None:
    for name in [n for n in sys.modules if n.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    for draw in (
        lambda p: plot_bench(BENCH, p),
        lambda p: plot_profile(Profile(), p),
        lambda p: require_matplotlib(),
    ):
        with pytest.raises(MissingDependencyError, match=r"pip install 'spawnml-core\[plot\]'"):
            draw(tmp_path / "x.png")
    assert issubclass(MissingDependencyError, SpawnMLError) and not (tmp_path / "x.png").exists()
    assert bench_bars(BENCH) and profile_bars(Profile()) == []  # the numbers need no matplotlib


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "make_readme_plots.py"), *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_readme_plot_script_draws_saved_bench_results(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = tmp_path / "bench.json"
    results.write_text(json.dumps(BENCH))
    out = tmp_path / "images" / "bench.png"
    done = _script(str(results), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert _png_size(out) == (660, 495)
    assert "--against onnxruntime --runs 5 --json build/bench-readme.json" in done.stdout
    missing = _script(str(tmp_path / "none.json"), "--out", str(tmp_path / "no.png"))
    assert missing.returncode == 2 and "spawnml bench squeezenet1_1" in missing.stderr
    assert not (tmp_path / "no.png").exists()
