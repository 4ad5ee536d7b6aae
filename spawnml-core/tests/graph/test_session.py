"""InferenceSession on small graphs: results, API shape, plans per shape set, device tensors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from graph_helpers import F, chain_model, chain_reference, make_model
from onnx import helper

import spawnml
from spawnml import DeviceTensor, InferenceSession


def test_relu_add_chain_matches_numpy() -> None:
    sess = InferenceSession(chain_model().SerializeToString(), backends=["cpu"])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, chain_reference(x), rtol=1e-6, atol=1e-6)


def test_inputs_and_outputs_follow_onnxruntime_conventions() -> None:
    sess = InferenceSession(chain_model(), backends=["cpu"])
    (i,) = sess.get_inputs()
    (o,) = sess.get_outputs()
    assert (i.name, i.shape, i.type) == ("x", ["N", 4], "tensor(float)")
    assert (o.name, o.shape, o.type) == ("y", ["N", 4], "tensor(float)")


def test_default_backends_are_the_available_ones() -> None:
    sess = InferenceSession(chain_model())
    assert sess.get_providers() == spawnml.get_available_backends()


def test_model_from_path(tmp_path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(chain_model().SerializeToString())
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(InferenceSession(str(path), ["cpu"]).run(["y"], {"x": x})[0],
                               chain_reference(x), rtol=1e-6)  # fmt: skip


def test_one_plan_per_distinct_input_shape_set() -> None:
    sess = InferenceSession(chain_model(), backends=["cpu"])
    for n in (1, 5, 1, 5, 2):
        x = np.full((n, 4), 0.5, np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)
    assert len(sess._runner.plans) == 3


def test_constants_fold_on_the_host() -> None:
    # c = Relu(a + b) of initializers folds away (one fused node); only the Add with the
    # input runs.
    a, b = np.arange(4, dtype=np.float32) - 2, np.ones(4, np.float32)
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["y"])]  # fmt: skip
    sess = InferenceSession(make_model(nodes, [("x", F, [4])], [("y", F, [4])], {"a": a, "b": b}),
                            backends=["cpu"])  # fmt: skip
    placement = sess.placement()
    assert placement.folded == 1 and dict(placement.counts) == {"cpu": 1}
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + np.maximum(a + b, 0))


def test_output_that_is_a_constant_or_an_input() -> None:
    nodes = [helper.make_node("Relu", ["k"], ["c"])]
    model = make_model(nodes, [("x", F, [2])], [("c", F, [2]), ("x", F, [2])],
                       {"k": np.array([-1, 2], np.float32)})  # fmt: skip
    c, x = InferenceSession(model, ["cpu"]).run(None, {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(c, [0, 2])
    np.testing.assert_array_equal(x, [1, 1])


def test_device_outputs_feed_another_session_without_a_host_copy(monkeypatch) -> None:
    sess = InferenceSession(chain_model(), backends=["cpu"])
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    (dev,) = sess.run(None, {"x": x}, device=True)
    assert isinstance(dev, DeviceTensor) and dev.backend.name == "cpu"
    downloads = []
    backend = dev.backend
    real = backend.download
    monkeypatch.setattr(backend, "download", lambda *a, **k: downloads.append(a) or real(*a, **k))
    (dev2,) = sess.run(None, {"x": dev}, device=True)
    assert downloads == []  # the feed was used in place
    monkeypatch.undo()
    np.testing.assert_allclose(dev2.numpy(), chain_reference(chain_reference(x)), rtol=1e-5)
    dev.close()
    dev2.close()


def test_run_is_safe_from_several_threads() -> None:
    sess = InferenceSession(chain_model(), backends=["cpu"])
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(10):
                x = rng.standard_normal((int(rng.integers(1, 4)), 4)).astype(np.float32)
                np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x),
                                           rtol=1e-6, atol=1e-6)  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_requested_outputs_come_in_the_requested_order() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["x", "x"], ["b"])]
    sess = InferenceSession(
        make_model(nodes, [("x", F, [3])], [("a", F, [3]), ("b", F, [3])]), ["cpu"]
    )
    x = np.array([-1, 0, 2], np.float32)
    b, a = sess.run(["b", "a"], {"x": x})
    np.testing.assert_array_equal(a, [0, 0, 2])
    np.testing.assert_array_equal(b, 2 * x)


def test_memory_plan_reuses_buffers() -> None:
    sess = InferenceSession(chain_model(n_relu=20, shape=(64, 4)), ["cpu"])
    mem = sess.memory()
    assert mem.intermediate_bytes == 22 * 64 * 4 * 4
    assert mem.planned_peak_bytes <= 3 * 64 * 4 * 4  # two ping-pong slots + the output
    x = np.random.default_rng(2).standard_normal((64, 4)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)


def test_intermediates_never_leave_the_device(monkeypatch) -> None:
    sess = InferenceSession(chain_model(n_relu=5), ["cpu"])
    backend = sess.backends[0]
    calls = []
    real = backend.download
    monkeypatch.setattr(backend, "download", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    sess.run(None, {"x": np.ones((2, 4), np.float32)})
    assert calls == [(2, 4)]  # only the output


@pytest.mark.parametrize("n", [0, 1])
def test_size_zero_and_one_batches(n: int) -> None:
    sess = InferenceSession(chain_model(), ["cpu"])
    x = np.ones((n, 4), np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x))
