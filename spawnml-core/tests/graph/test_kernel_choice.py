"""Backend kernel or portable lowering, chosen per shape by measurement (graph.choose)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from graph_helpers import chain_model, chain_reference

from spawnml import InferenceSession, hookimpl
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError
from spawnml.graph import choose
from spawnml.op import BackendKernel

pytest.importorskip("llvmlite", reason="the cpu measures its kernels only with native code")
CPUBackend = pytest.importorskip("spawnml_backend_cpu.backend").CPUBackend

SHAPE = (4096, 4)  # above choose.MIN_ELEMENTS (the chain adds a (4,) vector)


class SlowRelu(BackendKernel):
    """A correct Relu that takes 20 ms per run: the compiled lowering beats it."""

    backend = "cpu"
    op_type = "Relu"
    prepared = 0

    def prepare(self, backend, node, inputs, outputs, values):
        SlowRelu.prepared += 1

        def run(ins, outs):
            time.sleep(0.02)
            backend.upload(np.maximum(ins[0].numpy(), 0), outs[0].buffer)

        return run


@pytest.fixture
def slow_relu(extra_plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("SPAWNML_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SPAWNML_CPU_JIT", "1")
    monkeypatch.setenv(choose.ENV, "measure")
    monkeypatch.setattr(choose, "_DECISIONS", {})

    @hookimpl
    def spawnml_register_kernels(register):
        register(SlowRelu)

    extra_plugin(spawnml_register_kernels=spawnml_register_kernels)
    SlowRelu.prepared = 0


def _check(sess: InferenceSession) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)


def test_a_slower_backend_kernel_gives_way_to_the_portable_kernels(slow_relu):
    sess = InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])
    placement = sess.placement()
    assert placement.kinds["Relu_1"] == "portable"
    assert "measured faster than SlowRelu" in placement.reasons["Relu_1"]
    _check(sess)


def test_the_decision_is_measured_once_per_machine(slow_relu):
    InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])
    assert SlowRelu.prepared == 1  # the measurement's
    choose._DECISIONS.clear()  # a new process: only the disk cache remains
    sess = InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])
    assert SlowRelu.prepared == 1 and sess.placement().kinds["Relu_1"] == "portable"


def test_small_nodes_and_the_kernel_mode_keep_the_backend_kernel(slow_relu, monkeypatch):
    small = InferenceSession(chain_model(n_relu=1, shape=(4, 4)), backends=["cpu"])
    assert small.placement().kinds["Relu_1"] == "kernel" and SlowRelu.prepared == 1
    monkeypatch.setenv(choose.ENV, "kernel")
    sess = InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])
    assert sess.placement().kinds["Relu_1"] == "kernel"
    _check(sess)
    monkeypatch.setenv(choose.ENV, "fastest")
    with pytest.raises(InvalidInputError, match=choose.ENV):
        InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])


def test_backends_that_do_not_measure_always_run_their_kernels(slow_relu, monkeypatch):
    monkeypatch.setenv("SPAWNML_CPU_JIT", "0")  # the numpy executor does not measure
    sess = InferenceSession(chain_model(n_relu=1, shape=SHAPE), backends=["cpu"])
    assert sess.placement().kinds["Relu_1"] == "kernel"
    _check(sess)


class BrokenRelu(SlowRelu):
    """Refuses the made-up inputs of a measurement with a plain numpy-style error."""

    def prepare(self, backend, node, inputs, outputs, values):
        raise ValueError("could not broadcast input array")


def _relu_step():
    from spawnml.op import Node, TensorInfo
    from spawnml.registry import find_op

    node = Node("Relu", ["x"], ["y"], name="r", opset=17)
    info = TensorInfo(DType.float32, SHAPE)
    return find_op("", "Relu", 17), node, [info], [info]


def test_a_kernel_that_refuses_made_up_inputs_is_kept(slow_relu):
    op, node, inputs, outputs = _relu_step()
    backend = CPUBackend(jit=True)
    assert not choose.portable_preferred(backend, BrokenRelu(), op, node, inputs, outputs,
                                         [None])


def test_integer_inputs_whose_values_decide_the_work_are_not_made_up(slow_relu):
    from spawnml.op import TensorInfo

    op, node, inputs, outputs = _relu_step()
    lengths = TensorInfo(DType.int64, (4096,))  # e.g. sequence lengths: not measured
    backend = CPUBackend(jit=True)
    assert not choose.portable_preferred(backend, SlowRelu(), op, node, [*inputs, lengths],
                                         outputs, [None, None])
    assert SlowRelu.prepared == 0
    assert choose.portable_preferred(backend, SlowRelu(), op, node, inputs, outputs, [None])
    assert SlowRelu.prepared == 1


def test_processes_that_measure_at_once_adopt_the_first_stored_decision(slow_relu,
                                                                          monkeypatch):
    """Another process stored "kernel" while this one was measuring (its read came first):
    this one runs the kernel too, so both compute bit-identical results."""
    from spawnml.kernel.disk_cache import KernelDiskCache

    op, node, inputs, outputs = _relu_step()
    backend = CPUBackend(jit=True)
    key = choose._key(backend.kernel_choice_key(), SlowRelu(), node, inputs, outputs, [None])
    KernelDiskCache("choices", "txt").put(b"kernel", key)  # the other process's decision
    monkeypatch.setattr(KernelDiskCache, "get", lambda self, *key: None)  # read before it
    assert not choose.portable_preferred(backend, SlowRelu(), op, node, inputs, outputs,
                                         [None])
    assert SlowRelu.prepared == 1  # it did measure (and found the portable side faster)
