"""A tensor larger than the memory there is raises spawnml's OutOfMemoryError, naming the
node, the value, its shape and bytes, before numpy or a device tries to allocate it; the
session keeps working for feeds that fit (issue #20)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession, SessionOptions, get_available_backends
from spawnml.backend import Backend
from spawnml.errors import InvalidInputError, OutOfMemoryError
from spawnml.memory import MAX_TENSOR_BYTES_ENV, available_host_bytes, tensor_byte_limit
from spawnml.registry import get_backend
from spawnml.tensor import DeviceTensor

sys.path.insert(0, str(Path(__file__).parent / "graph"))
from graph_helpers import F, make_model

I64 = TensorProto.INT64
BACKENDS = [b for b in ("cpu", "wasm") if b in get_available_backends()]
HUGE = np.array([1_000_000, 1_000_000], np.int64)  # 10^12 float32 elements: 4 TB
ONE = numpy_helper.from_array(np.array([1.5], np.float32))


@pytest.fixture(autouse=True)
def default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's available memory decides, whatever the environment running the tests."""
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)


def expand_by_feed() -> bytes:
    """y = Expand(x, s): the output's shape is a feed's value (known only at run time)."""
    model = make_model([helper.make_node("Expand", ["x", "s"], ["y"])],
                       [("x", F, [1]), ("s", I64, [2])], [("y", F, None)])  # fmt: skip
    return model.SerializeToString()


def constant_of_shape_by_feed() -> bytes:
    """y = ConstantOfShape(s) + x."""
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=ONE),
             helper.make_node("Add", ["c", "x"], ["y"])]  # fmt: skip
    model = make_model(nodes, [("x", F, [1]), ("s", I64, [2])], [("y", F, None)])
    return model.SerializeToString()


def onnxruntime(model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build", [expand_by_feed, constant_of_shape_by_feed])
def test_a_huge_run_time_shape_is_refused_and_the_session_keeps_working(backend, build) -> None:
    model = build()
    session = InferenceSession(model, backends=[backend])
    small = {"x": np.array([2.0], np.float32), "s": np.array([3, 5], np.int64)}
    np.testing.assert_array_equal(session.run(None, small)[0], onnxruntime(model, small)[0])
    pool = session.backends[0].pool
    live = pool.live_bytes
    with pytest.raises(OutOfMemoryError) as err:
        session.run(None, {"x": small["x"], "s": HUGE})
    message = str(err.value)
    assert "output 'y'" in message or "output 'c'" in message
    assert "shape (1000000, 1000000)" in message and "4000000000000 bytes" in message
    assert pool.live_bytes == live  # the failed run freed what it had taken
    for _ in range(3):  # normal path, then recorded replays
        np.testing.assert_array_equal(session.run(None, small)[0], onnxruntime(model, small)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_huge_constant_is_refused_when_the_model_is_planned(backend) -> None:
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=ONE),
             helper.make_node("Add", ["c", "x"], ["y"])]  # fmt: skip
    model = make_model(nodes, [("x", F, [1])], [("y", F, None)], {"s": HUGE})
    with pytest.raises(
        OutOfMemoryError,
        match=r"ConstantOfShape.*output 'c' \(float32, shape "
        r"\(1000000, 1000000\)\) needs 4000000000000",
    ):
        InferenceSession(model.SerializeToString(), backends=[backend])


def test_the_limit_follows_session_options_then_the_environment(monkeypatch) -> None:
    model = expand_by_feed()
    feeds = {"x": np.array([2.0], np.float32), "s": np.array([10, 10], np.int64)}  # 400 bytes
    tight = InferenceSession(model, backends=["cpu"], options={"max_tensor_bytes": 399})
    with pytest.raises(OutOfMemoryError, match="needs 400 bytes"):
        tight.run(None, feeds)
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "399")
    with pytest.raises(OutOfMemoryError, match="needs 400 bytes"):
        InferenceSession(model, backends=["cpu"]).run(None, feeds)
    roomy = InferenceSession(model, backends=["cpu"], options={"max_tensor_bytes": 400})
    np.testing.assert_array_equal(roomy.run(None, feeds)[0], np.full((10, 10), 2, np.float32))
    options = SessionOptions(max_tensor_bytes=0)
    unlimited = InferenceSession(model, backends=["cpu"], options=options)
    assert unlimited.run(None, feeds)[0].shape == (10, 10)


def test_the_default_limit_is_the_memory_the_host_has_available(monkeypatch) -> None:
    available = available_host_bytes()
    assert available is not None and available > 0
    limit = tensor_byte_limit()
    assert limit is not None and abs(limit - available) < available // 4  # it moves a little
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "off")
    assert tensor_byte_limit() is None
    assert tensor_byte_limit(12345) == 12345  # the session option wins
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "lots")
    with pytest.raises(InvalidInputError, match=MAX_TENSOR_BYTES_ENV):
        tensor_byte_limit()


def test_an_allocator_giving_up_is_an_out_of_memory_error_naming_the_tensor(monkeypatch) -> None:
    cpu: Backend = get_backend("cpu")

    def refuse(nbytes: int) -> object:
        raise MemoryError(f"Unable to allocate {nbytes} bytes")

    monkeypatch.setattr(cpu.pool, "_allocate", refuse)
    with pytest.raises(
        OutOfMemoryError,
        match=r"float32 tensor of shape \(1000, 1000\) "
        r"\(4000000 bytes\): Unable to allocate",
    ):
        DeviceTensor.empty(cpu, (1000, 1000), "float32")


def loop_model() -> bytes:
    """acc = acc0 + M * x through a Loop whose body runs on the device as its own graph."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", F, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [2])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)
    inputs = [("M", I64, []), ("acc0", F, [2]), ("x", F, [2])]
    return make_model([loop], inputs, [("acc", F, [2])]).SerializeToString()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("record", ["0", "1"])
def test_loop_bodies_give_their_device_buffers_back(backend, record, monkeypatch) -> None:
    """Each body run's results are read to the host and their buffers freed: device memory
    does not grow with the iterations (bodies run the normal path, or recorded)."""
    monkeypatch.setenv("SPAWNML_RECORD", record)
    model = loop_model()
    session = InferenceSession(model, backends=[backend])
    feeds = {"M": np.array(40, np.int64), "acc0": np.array([-3, 1], np.float32),
             "x": np.array([1, -1], np.float32)}  # fmt: skip
    pool = session.backends[0].pool
    live = []
    for _ in range(4):
        np.testing.assert_array_equal(session.run(None, feeds)[0], onnxruntime(model, feeds)[0])
        live.append(pool.live_bytes)
    assert live[1:] == [live[1]] * 3, live
