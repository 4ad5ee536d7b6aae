"""Whole-plan modules: a recorded plan as one call per thread, the same answers as one call
per launch, rebinding without recompiling, and a trap that cannot leave a barrier waiting."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import spawnml
from spawnml.errors import InvalidInputError
from spawnml.kernel.analysis import work_estimate
from spawnml.tensor import DeviceTensor
from spawnml_backend_wasm import WasmBackend
from spawnml_backend_wasm.plan import plan_module
from spawnml_backend_wasm.runtime import MIN_WORK_PER_THREAD, PlanCall, Program
from spawnml_backend_wasm.wat import WatKernel


def _model() -> bytes:
    """Big launches (split across threads) between small ones (thread 0 alone): a conv,
    elementwise chains on a large tensor, a reduction to a small one, a small MatMul."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (16, 8, 3, 3),
                           rng.standard_normal((16, 8, 3, 3)).astype(np.float32).ravel())
    m = helper.make_tensor("m", TensorProto.FLOAT, (16, 5),
                           rng.standard_normal((16, 5)).astype(np.float32).ravel())
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s"]),
        helper.make_node("Mul", ["c", "s"], ["a"]),
        helper.make_node("ReduceMean", ["a"], ["r"], axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["r", "m"], ["y"]),
        helper.make_node("Tanh", ["a"], ["t"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 64, 64))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, None)], [w, m],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.fixture(scope="module")
def model() -> tuple[bytes, np.ndarray, list[np.ndarray]]:
    data = _model()
    x = np.random.default_rng(1).standard_normal((1, 8, 64, 64)).astype(np.float32)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return data, x, sess.run(None, {"x": x})


def _plan_calls(sess: spawnml.InferenceSession) -> list[PlanCall]:
    plan = sess._runner.last_plan
    recs = [r for r in plan.recordings.values() if r is not None]
    return [g.call for r in recs for g in r.groups if isinstance(g.call, PlanCall)]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("linked", ["0", "1"])
def test_plan_module_matches_onnxruntime(model, threads: int, linked: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    data, x, want = model
    monkeypatch.setenv("SPAWNML_WASM_PLAN", linked)
    backend = WasmBackend(threads=threads)
    try:
        sess = spawnml.InferenceSession(data, backends=[backend])
        for _ in range(3):  # the normal path, then the recording's replays
            got = sess.run(None, {"x": x})
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        calls = _plan_calls(sess)
        assert len(calls) == (linked == "1")
        if calls and threads > 1:
            assert calls[0].threads == threads  # the conv and the chains are split
            assert "$barrier (local.get $block)" in calls[0].program.source
    finally:
        backend.close()


def test_rebinding_rewrites_addresses_and_reuses_the_module(model) -> None:
    data, x, want = model
    backend = WasmBackend(threads=2)
    try:
        sess = spawnml.InferenceSession(data, backends=[backend])
        feeds = [DeviceTensor.from_numpy(backend, x), DeviceTensor.from_numpy(backend, -x)]
        minus = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
            None, {"x": -x})
        modules = set()
        for i in range(6):  # another feed buffer each run: the launches reading it rebind
            got = sess.run(None, {"x": feeds[i % 2]})
            for g, w in zip(got, want if i % 2 == 0 else minus):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
            modules.update(id(c.program.module) for c in _plan_calls(sess))
        assert len(modules) == 1
    finally:
        backend.close()


_STORE_SEVEN = WatKernel(
    "stores 7",
    (),
    "  (func $run (param $lo i32) (param $hi i32) (param $out i32)\n"
    "    (i32.store (local.get $out) (i32.const 7)))",
)
_STORE_ONE = WatKernel(
    "stores 1",
    (),
    "  (func $run (param $lo i32) (param $hi i32) (param $out i32)\n"
    "    (i32.store (local.get $out) (i32.const 1)))",
)


def test_abort_releases_a_thread_waiting_at_a_barrier() -> None:
    """What ``PlanCall`` does when a thread traps: thread 0 waits at the barrier for a thread
    that will never come; ``abort`` wakes it and it returns 1 without running what follows.
    (A real trap is not raised here: wasmtime reports traps through signals, which the test
    runner's fault handler takes on worker threads.)"""
    backend = WasmBackend(threads=2)
    runtime = backend.runtime
    try:
        text = plan_module([_STORE_SEVEN, _STORE_ONE],
                           [(0, 1000, 2, 1), (1, 1, 1, 1)])  # a barrier between them
        program = Program("abort-plan", runtime.module(text), 0, source=text)
        out = runtime.memory.allocate(64)
        block = runtime.memory.allocate(64)
        runtime.memory.view(block, 24)[:] = np.array([0, 0, 0, 0, out, out], np.uint32).view(
            np.uint8)
        status: list[int] = []

        def thread_zero() -> None:
            store, fn = runtime._function(program)
            status.append(fn(store, 0, 2, block))

        worker = threading.Thread(target=thread_zero, daemon=True)
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive()  # waiting for thread 1
        call = PlanCall(runtime, program, block, 2)
        call._abort()
        worker.join(timeout=60)
        assert not worker.is_alive(), "abort did not release the barrier"
        assert status == [1]
        assert runtime.memory.view(out, 4).view(np.int32)[0] == 7  # the second launch never ran
    finally:
        backend.close()


def test_plan_switch_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from spawnml_backend_wasm.backend import plan_modules_enabled

    monkeypatch.setenv("SPAWNML_WASM_PLAN", "yes")
    with pytest.raises(InvalidInputError, match="SPAWNML_WASM_PLAN"):
        plan_modules_enabled()


def test_heavy_invocations_split_across_threads() -> None:
    """The split follows work, not invocations: few invocations with long loops (a register
    tile's inner product) are split; many cheap ones below the threshold are not."""
    from spawnml.kernel import Output, Tensor, kernel

    @kernel
    def row_sums(x: Tensor, out: Output):
        i = out.flat
        acc = 0.0
        for k in range(x.shape[1]):
            acc = acc + x[i, k]
        return acc

    spec = row_sums.specialize([((64, 8192), "float32")], ((64,), "float32"))
    work = work_estimate(spec.body)
    assert work >= 8192
    heavy = Program("heavy", None, 64, work)  # type: ignore[arg-type]
    light = Program("light", None, MIN_WORK_PER_THREAD // 2, 1)  # type: ignore[arg-type]
    assert heavy.parts(2) == 2 and light.parts(2) == 1
    assert Program("big", None, 4 * MIN_WORK_PER_THREAD, 1).parts(2) == 2  # type: ignore[arg-type]


def test_memory_keeps_slack_after_the_last_block() -> None:
    """Stride-2 vector loads read up to SLACK bytes past a buffer: never past the memory."""
    from spawnml_backend_wasm.memory import SLACK

    backend = WasmBackend(threads=1)
    try:
        memory = backend.runtime.memory
        for nbytes in (16, 1 << 20, 3 << 20, 65536 * 40 - 16):
            memory.allocate(nbytes)
            assert memory.size >= memory.top + SLACK
    finally:
        backend.close()


def test_a_thread_calls_its_part_in_chunks() -> None:
    """A browser optimises a Wasm function only for its later calls: a thread's part of a
    split launch is called as CHUNKS_PER_PART ranges in a loop (the outputs are checked
    against onnxruntime at 2 and 3 threads above); a launch on thread 0 alone is one call."""
    from spawnml_backend_wasm.plan import CHUNKS_PER_PART, sequence_body, split_step

    split = "\n".join(sequence_body([(0, 100_000, 2, ["(i32.const 64)"])], "(i32.const 0)"))
    step = split_step(100_000, 2)
    assert "(loop $chunk" in split and split.count("(call $k0 ") == 1
    assert f"(i32.const {split_step(step, CHUNKS_PER_PART)})" in split
    alone = "\n".join(sequence_body([(0, 10, 1, ["(i32.const 64)"])], "(i32.const 0)"))
    assert "loop" not in alone and "(i32.const 0) (i32.const 10)" in alone
