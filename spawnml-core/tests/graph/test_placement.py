"""Placement with a backend that lacks an op: fallback, transfers, the log line, strict."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from graph_helpers import chain_model, chain_reference

from spawnml import InferenceSession, UnsupportedOpError, hookimpl
from spawnml.errors import KernelCompileError
from spawnml.op import BackendKernel

CPUBackend = pytest.importorskip("spawnml_backend_cpu.backend").CPUBackend


class AddlessBackend(CPUBackend):
    """A cpu-like device whose compiler rejects the broadcasting binary kernel (as a
    device without some feature would): every Add must run elsewhere."""

    name = "addless"

    def compile(self, kernel):
        if kernel.name == "binary_map":
            raise KernelCompileError("addless: binary kernels are not supported here")
        return super().compile(kernel)


@pytest.fixture
def addless(extra_plugin) -> None:
    @hookimpl
    def spawnml_register_backends(register):
        register(AddlessBackend)

    extra_plugin(spawnml_register_backends=spawnml_register_backends)


def test_nodes_the_first_backend_lacks_fall_back_to_the_next(addless, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="spawnml.session"):
        sess = InferenceSession(chain_model(n_relu=2, shape=(2, 4)), backends=["addless", "cpu"])
    placement = sess.placement()
    assert placement["Relu_1"] == "addless" and placement["Relu_2"] == "addless"
    assert placement["Sub_0"] == "cpu" and placement["Add_3"] == "cpu"
    assert dict(placement.counts) == {"addless": 2, "cpu": 2}
    assert "binary kernels are not supported" in placement.reasons["Sub_0"]
    records = [r for r in caplog.records if r.name == "spawnml.session"]
    assert len(records) == 1
    assert "2 of 4 nodes do not run on addless (Add -> cpu; Sub -> cpu)" in records[0].getMessage()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for _ in range(2):  # logged once, not per run
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)
    assert len([r for r in caplog.records if r.name == "spawnml.session"]) == 1


def test_strict_lists_every_node_the_first_backend_cannot_run(addless) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        InferenceSession(chain_model(shape=(2, 4)), backends=["addless", "cpu"], strict=True)
    message = str(info.value)
    assert "cannot run 2 node(s)" in message
    assert "Sub node 'Sub_0' -> cpu" in message and "Add node 'Add_4' -> cpu" in message


def test_strict_with_symbolic_shapes_raises_on_first_run(addless) -> None:
    sess = InferenceSession(chain_model(shape=("N", 4)), backends=["addless", "cpu"], strict=True)
    with pytest.raises(UnsupportedOpError, match="cannot run 2 node"):
        sess.run(None, {"x": np.ones((3, 4), np.float32)})


def test_strict_passes_when_the_first_backend_runs_everything(addless) -> None:
    sess = InferenceSession(chain_model(shape=(2, 4)), backends=["cpu", "addless"], strict=True)
    assert dict(sess.placement().counts) == {"cpu": 5}


def test_no_backend_can_run_it_computes_on_the_host(addless, caplog) -> None:
    sess = InferenceSession(chain_model(shape=(2, 4)), backends=["addless"])
    placement = sess.placement()
    assert placement["Sub_0"] == "host" and placement.kinds["Sub_0"] == "reference"
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)


class CountingRelu(BackendKernel):
    backend = "cpu"
    op_type = "Relu"
    runs = 0

    def prepare(self, backend, node, inputs, outputs, values):
        def run(ins, outs):
            CountingRelu.runs += 1
            backend.upload(np.maximum(ins[0].numpy(), 0), outs[0].buffer)

        return run


def test_a_registered_backend_kernel_is_preferred(extra_plugin) -> None:
    @hookimpl
    def spawnml_register_kernels(register):
        register(CountingRelu)

    extra_plugin(spawnml_register_kernels=spawnml_register_kernels)
    sess = InferenceSession(chain_model(n_relu=3, shape=(2, 4)), backends=["cpu"])
    assert [sess.placement().kinds[f"Relu_{i}"] for i in (1, 2, 3)] == ["kernel"] * 3
    CountingRelu.runs = 0
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(x), rtol=1e-6)
    assert CountingRelu.runs == 3


class TinyBackend(CPUBackend):
    """A cpu-like device whose buffers hold at most 64 bytes (16 float32 values)."""

    name = "tiny"

    @property
    def capabilities(self):
        import dataclasses

        return dataclasses.replace(super().capabilities, max_buffer_bytes=64)


def test_tensors_larger_than_a_device_buffer_fall_back_instead_of_failing(extra_plugin, caplog):
    @hookimpl
    def spawnml_register_backends(register):
        register(TinyBackend)

    extra_plugin(spawnml_register_backends=spawnml_register_backends)
    big = InferenceSession(chain_model(n_relu=1, shape=(8, 4)), backends=["tiny", "cpu"])
    small = InferenceSession(chain_model(n_relu=1, shape=(2, 4)), backends=["tiny", "cpu"])
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    assert set(big.placement().counts) == {"cpu"}  # 128-byte tensors exceed the 64-byte buffers
    assert set(small.placement().counts) == {"tiny"}
    reference = InferenceSession(chain_model(n_relu=1, shape=(8, 4)), backends=["cpu"])
    want = reference.run(None, {"x": x})
    np.testing.assert_allclose(big.run(None, {"x": x})[0], want[0], rtol=1e-6)


class WordOnlyBackend(CPUBackend):
    """Stores no 8-bit types natively (like WebGPU) and holds 128 bytes per buffer."""

    name = "wordonly"

    @property
    def capabilities(self):
        import dataclasses

        from spawnml.dtypes import DType

        caps = super().capabilities
        dtypes = caps.dtypes - {DType.uint8, DType.int8, DType.bool}
        return dataclasses.replace(caps, dtypes=dtypes, max_buffer_bytes=128)


def test_planned_buffers_are_sized_in_bytes_on_every_backend(extra_plugin):
    @hookimpl
    def spawnml_register_backends(register):
        register(WordOnlyBackend)

    extra_plugin(spawnml_register_backends=spawnml_register_backends)
    sess = InferenceSession(chain_model(n_relu=3, shape=(8, 4)), backends=["wordonly"])
    x = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
    assert set(sess.placement().counts) == {"wordonly"}
    want = InferenceSession(chain_model(n_relu=3, shape=(8, 4)), backends=["cpu"]).run(
        None, {"x": x}
    )
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want[0], rtol=1e-6)


def test_the_log_line_says_why_a_node_is_host_only(caplog) -> None:
    """Cast has a portable kernel, but not for element types no kernel holds (bfloat16): the
    note names the reason, not just "host-only"."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with caplog.at_level(logging.WARNING, logger="spawnml.session"):
        sess = InferenceSession(model, backends=["cpu"])
        sess.run(None, {"x": np.ones(3, np.float32)})
    (record,) = [r for r in caplog.records if r.name == "spawnml.session"]
    assert list(sess.placement().kinds.values()) == ["host"]
    assert "host-only: Cast x1 (element type bfloat16 has no kernel type)" in record.getMessage()
