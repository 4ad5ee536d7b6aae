"""Sequence and optional values through a session: fed and returned as onnxruntime does
(lists of arrays, None for an empty optional), made and read on the host, mixed with
device steps, carried through Loop and mapped by SequenceMap; compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from graph_helpers import F
from onnx import TensorProto, helper

from spawnml import InferenceSession, InvalidInputError, get_available_backends

ort = pytest.importorskip("onnxruntime")

BACKENDS = [b for b in ("cpu", "wasm", "webgpu") if b in get_available_backends()]
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))


def _model(nodes, inputs, outputs, opset: int = 18) -> bytes:
    graph = helper.make_graph(nodes, "seq", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _split_map_concat() -> bytes:
    """x -> Relu -> SplitToSequence(split=[1,2,3] on axis 1) -> SequenceMap(Sigmoid(e)*w)
    -> ConcatFromSequence -> Neg, plus SequenceLength and SequenceAt(-1)."""
    body = helper.make_graph(
        [helper.make_node("Sigmoid", ["e"], ["s"]), helper.make_node("Mul", ["s", "w"], ["o"])],
        "body", [helper.make_tensor_value_info("e", F, None),
                 helper.make_tensor_value_info("w", F, None)],
        [helper.make_tensor_value_info("o", F, None)])  # fmt: skip
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("SplitToSequence", ["r", "split"], ["parts"], axis=1),
        helper.make_node("SequenceMap", ["parts", "w"], ["mapped"], body=body),
        helper.make_node("ConcatFromSequence", ["mapped"], ["cat"], axis=1),
        helper.make_node("Neg", ["cat"], ["y"]),
        helper.make_node("SequenceLength", ["mapped"], ["n"]),
        helper.make_node("SequenceAt", ["mapped", "last"], ["tail"]),
    ]
    graph = helper.make_graph(
        nodes, "seq", [helper.make_tensor_value_info("x", F, [2, 6]),
                       helper.make_tensor_value_info("w", F, [1])],
        [helper.make_tensor_value_info("y", F, None),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("tail", F, None),
         helper.make_value_info("mapped", SEQ_F)],
        [helper.make_tensor("split", TensorProto.INT64, [3], [1, 2, 3]),
         helper.make_tensor("last", TensorProto.INT64, [], [-1])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model.SerializeToString()


def _assert_same(got, want) -> None:
    assert isinstance(got, list) == isinstance(want, list)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    else:
        assert np.asarray(got).shape == np.asarray(want).shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_map_concat_matches_onnxruntime(backend: str) -> None:
    data = _split_map_concat()
    feeds = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6),
             "w": np.array([1.5], np.float32)}  # fmt: skip
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = InferenceSession(data, backends=[backend])
    got = sess.run(None, feeds)
    for g, w in zip(got, want):
        _assert_same(g, w)
    assert [a.shape for a in got[3]] == [(2, 1), (2, 2), (2, 3)]
    assert sess.get_outputs()[3].type == "seq(tensor(float))"


def test_sequence_feed_insert_and_erase_match_onnxruntime() -> None:
    nodes = [
        helper.make_node("SequenceInsert", ["s", "t", "pos"], ["s2"]),
        helper.make_node("SequenceErase", ["s2"], ["s3"]),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
    ]
    data = _model(nodes, [helper.make_value_info("s", SEQ_F),
                          helper.make_tensor_value_info("t", F, None),
                          helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
                  [helper.make_value_info("s3", SEQ_F),
                   helper.make_tensor_value_info("n", TensorProto.INT64, [])])  # fmt: skip
    feeds = {"s": [np.ones((2,), np.float32), np.zeros((3,), np.float32)],
             "t": np.full((4,), 7, np.float32), "pos": np.array(0, np.int64)}  # fmt: skip
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = InferenceSession(data, backends=["cpu"]).run(None, feeds)
    for g, w in zip(got, want):
        _assert_same(g, w)


def test_loop_carries_a_sequence() -> None:
    """Each iteration appends i * x to a carried sequence; concatenated afterwards."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["row"]),
         helper.make_node("SequenceInsert", ["seq_in", "row"], ["seq_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_value_info("seq_in", SEQ_F)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_value_info("seq_out", SEQ_F)])  # fmt: skip
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
        helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body),
        helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1),
    ]
    data = _model(nodes, [helper.make_tensor_value_info("M", TensorProto.INT64, []),
                          helper.make_tensor_value_info("x", F, [3])],
                  [helper.make_tensor_value_info("y", F, None)])  # fmt: skip
    x = np.array([1, -2, 3], np.float32)
    for m in (4, 1):
        feeds = {"M": np.array(m, np.int64), "x": x}
        want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
        got = InferenceSession(data, backends=["cpu"]).run(None, feeds)
        _assert_same(got[0], want[0])
        assert got[0].shape == (m, 3)


@pytest.mark.parametrize("opset", [16, 18])  # both OptionalHasElement epochs (15-17, 18+)
def test_optional_values_in_and_out(opset: int) -> None:
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, None))
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("Identity", ["o"], ["same"])]  # fmt: skip
    data = _model(nodes, [helper.make_value_info("o", opt)],
                  [helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                   helper.make_value_info("same", opt)], opset=opset)  # fmt: skip
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    sess = InferenceSession(data, backends=["cpu"])
    has, same = sess.run(None, {"o": None})
    assert has.item() is False and same is None
    x = np.arange(3, dtype=np.float32)
    has, same = sess.run(None, {"o": x})
    assert has.item() is True
    np.testing.assert_array_equal(same, x)


def test_bad_sequence_feeds_and_positions_raise_clear_errors() -> None:
    data = _split_map_concat()
    nodes = [helper.make_node("SequenceAt", ["s", "pos"], ["t"])]
    at = _model(nodes, [helper.make_value_info("s", SEQ_F),
                        helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
                [helper.make_tensor_value_info("t", F, None)])  # fmt: skip
    sess = InferenceSession(at, backends=["cpu"])
    with pytest.raises(InvalidInputError, match="expected a sequence"):
        sess.run(None, {"s": np.zeros(3, np.float32), "pos": np.array(0, np.int64)})
    with pytest.raises(InvalidInputError, match=r"s\[1\].*dtype"):
        sess.run(None, {"s": [np.zeros(2, np.float32), np.zeros(2, np.int64)],
                        "pos": np.array(0, np.int64)})  # fmt: skip
    with pytest.raises(InvalidInputError, match="position 5 is outside"):
        sess.run(None, {"s": [np.zeros(2, np.float32)], "pos": np.array(5, np.int64)})
    assert data  # the other model stays valid
