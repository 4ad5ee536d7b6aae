"""Results of the cpu backend depend on its own thread count, never on BLAS's setting from
the environment (Ray runs its workers with ``OMP_NUM_THREADS=1``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits

from spawnml import InferenceSession
from spawnml_backend_cpu.backend import CPUBackend

RNG = np.random.default_rng(5)


def _model(op: str, x_shape: tuple[int, ...], w: np.ndarray) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node(op, ["x", "w"], ["y"], **({"transB": 0} if op == "Gemm" else {}))
    graph = helper.make_graph([node], op, [x], [y], [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_follow_the_environments_blas_threads(op, threads):
    w = RNG.standard_normal((512, 1000)).astype(np.float32)
    x = RNG.standard_normal((1, 512)).astype(np.float32)
    session = InferenceSession(_model(op, x.shape, w), [CPUBackend(threads=threads)])
    assert "kernel" in set(session.placement().kinds.values())  # the BLAS kernel ran
    runs = []  # OpenBLAS 0.3.31 gives 7 of these 1000 values other bits at 1 and 2 threads
    for outside in (1, 2):  # what OMP_NUM_THREADS / OPENBLAS_NUM_THREADS would set
        with threadpool_limits(outside, user_api="blas"):
            runs.append(session.run(None, {"x": x})[0])
    np.testing.assert_array_equal(runs[0], runs[1])
    with threadpool_limits(threads, user_api="blas"):
        np.testing.assert_array_equal(runs[0], x @ w)  # BLAS at the backend's count


def _gemv_sessions(n: int) -> tuple[list[InferenceSession], np.ndarray, np.ndarray]:
    """``n`` sessions of one GEMV-shaped MatMul at 2 backend threads, its x and w."""
    w = RNG.standard_normal((512, 1000)).astype(np.float32)
    x = RNG.standard_normal((1, 512)).astype(np.float32)
    model = _model("MatMul", x.shape, w)
    return [InferenceSession(model, [CPUBackend(threads=2)]) for _ in range(n)], x, w


def test_a_thread_pins_blas_while_another_thread_controls_threadpoolctl():
    """The Ray Data actor case: its main thread ran kernels first (measuring, in
    ``__init__``), which made it threadpoolctl's controlling thread for OpenBLAS, and its
    ``__call__`` thread's pins were then ignored: BLAS ran at Ray's 1 thread."""
    (session,), x, w = _gemv_sessions(1)
    with threadpool_limits(2, user_api="blas"):
        want = x @ w
    got: list[np.ndarray] = []
    with threadpool_limits(1, user_api="blas"):  # this thread now controls OpenBLAS
        worker = threading.Thread(target=lambda: got.append(session.run(None, {"x": x})[0]))
        worker.start()
        worker.join()
    np.testing.assert_array_equal(got[0], want)


def test_threads_running_sessions_at_once_keep_their_blas_threads():
    """The count is process-wide: one thread's restore must not land inside another's call."""
    sessions, x, w = _gemv_sessions(2)
    with threadpool_limits(2, user_api="blas"):
        want = x @ w
    wrong = [0, 0]

    def work(i: int, s: InferenceSession) -> None:
        for _ in range(300):
            wrong[i] += not np.array_equal(s.run(None, {"x": x})[0], want)

    with threadpool_limits(1, user_api="blas"):
        workers = [threading.Thread(target=work, args=(i, s))
                   for i, s in enumerate(sessions)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    assert wrong == [0, 0]
