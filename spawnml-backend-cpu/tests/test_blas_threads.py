"""Results of the cpu backend depend on its own thread count, never on BLAS's setting from
the environment (Ray runs its workers with ``OMP_NUM_THREADS=1``)."""

from __future__ import annotations

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
