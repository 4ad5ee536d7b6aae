"""FlexAttention with score_mod / prob_mod graphs: the session inlines them (with the op's
expansion into primitive operators) and every available backend matches onnx.reference;
malformed modifier graphs raise InvalidModelError naming the node."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from spawnml import InferenceSession, InvalidModelError, get_available_backends

BACKENDS = [b for b in ("cpu", "wasm", "webgpu", "webgl", "opencl", "cuda")
            if b in get_available_backends()]
F = TensorProto.FLOAT


def _const(name: str, value, dtype=np.float32) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(
        np.array(value, dtype), name))


def alibi_soft_cap() -> onnx.GraphProto:
    """score_mod: 20 * tanh(s / 20) minus 0.25 * (head + 1) * |q - kv| (indices by Range)."""
    nodes = [
        _const("cap", 20.0), _const("slope", 0.25),
        _const("zero", 0, np.int64), _const("one", 1, np.int64),
        _const("hq_shape", [1, -1, 1, 1], np.int64), _const("q_shape", [1, 1, -1, 1], np.int64),
        helper.make_node("Shape", ["s"], ["dims"]),
        helper.make_node("Gather", ["dims", "one"], ["h_dim"], axis=0),
        helper.make_node("Shape", ["s"], ["l_dim"], start=2, end=3),
        helper.make_node("Shape", ["s"], ["s_dim"], start=3),
        helper.make_node("Squeeze", ["l_dim"], ["l"]),
        helper.make_node("Squeeze", ["s_dim"], ["kv"]),
        helper.make_node("Range", ["zero", "h_dim", "one"], ["h_range"]),
        helper.make_node("Range", ["zero", "l", "one"], ["q_range"]),
        helper.make_node("Range", ["zero", "kv", "one"], ["kv_idx"]),
        helper.make_node("Reshape", ["h_range", "hq_shape"], ["h_idx"]),
        helper.make_node("Reshape", ["q_range", "q_shape"], ["q_idx"]),
        helper.make_node("Sub", ["q_idx", "kv_idx"], ["dist"]),
        helper.make_node("Abs", ["dist"], ["adist"]),
        helper.make_node("Add", ["h_idx", "one"], ["h1"]),
        helper.make_node("Mul", ["adist", "h1"], ["scaled"]),
        helper.make_node("Cast", ["scaled"], ["fdist"], to=F),
        helper.make_node("Mul", ["fdist", "slope"], ["bias"]),
        helper.make_node("Div", ["s", "cap"], ["t"]),
        helper.make_node("Tanh", ["t"], ["th"]),
        helper.make_node("Mul", ["th", "cap"], ["capped"]),
        helper.make_node("Sub", ["capped", "bias"], ["s_out"]),
    ]
    return _modifier("alibi_soft_cap", nodes, ["s"], ["s_out"])


def drop_small() -> onnx.GraphProto:
    """prob_mod: probabilities below 0.05 set to zero, the rest scaled by 1.5."""
    nodes = [
        _const("floor", 0.05), _const("gain", 1.5), _const("nil", 0.0),
        helper.make_node("Less", ["p", "floor"], ["small"]),
        helper.make_node("Mul", ["p", "gain"], ["big"]),
        helper.make_node("Where", ["small", "nil", "big"], ["p_out"]),
    ]
    return _modifier("drop_small", nodes, ["p"], ["p_out"])


def _modifier(name: str, nodes, inputs, outputs) -> onnx.GraphProto:
    dims = ["B", "H", "L", "S"]
    return helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, F, dims) for n in inputs],
        [helper.make_tensor_value_info(n, F, dims) for n in outputs])


def flex_model(q_shape, kv_shape, *, extra_inputs=(), **attrs) -> onnx.ModelProto:
    """A model of one FlexAttention node over Q, K, V (float32)."""
    v_shape = (*kv_shape[:3], 5)
    y_shape = (*q_shape[:3], 5)
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex",
                            domain="ai.onnx.preview", **attrs)
    inputs = [helper.make_tensor_value_info(n, F, s)
              for n, s in (("Q", q_shape), ("K", kv_shape), ("V", v_shape), *extra_inputs)]
    graph = helper.make_graph([node], "flex", inputs, [helper.make_tensor_value_info("Y", F,
                                                                                     y_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26),
                                                   helper.make_opsetid("ai.onnx.preview", 1)])


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def _check(model: onnx.ModelProto, backend: str, dtype=np.float32, tol: float = 1e-5) -> None:
    feeds = {k: v.astype(dtype) for k, v in _feeds(model).items()}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    session = InferenceSession(model.SerializeToString(), backends=[backend], strict=True)
    (got,) = session.run(None, feeds)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=10 * tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_score_and_prob_mod_match_onnx_reference(backend: str) -> None:
    model = flex_model((2, 4, 3, 8), (2, 2, 6, 8), score_mod=alibi_soft_cap(),
                       prob_mod=drop_small(), scale=0.3)
    _check(model, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_score_mod_alone_with_default_scale(backend: str) -> None:
    _check(flex_model((1, 2, 4, 8), (1, 2, 4, 8), score_mod=alibi_soft_cap()), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_inputs_run_the_modifiers_in_float32(backend: str) -> None:
    model = flex_model((1, 2, 3, 4), (1, 2, 5, 4), score_mod=alibi_soft_cap(),
                       prob_mod=drop_small())
    for v in [*model.graph.input, *model.graph.output]:
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    _check(model, backend, np.float16, tol=1e-3)


def test_modifier_reads_an_outer_value_named_like_the_expansion() -> None:
    """A modifier reading an outer value is not captured by the expansion's own names (the
    truth: the same bias as a constant inside the graph, as onnx.reference cannot read outer
    values from a modifier)."""
    add = helper.make_node("Add", ["s", "flex/Q"], ["s_out"])
    model = flex_model((1, 2, 3, 4), (1, 2, 3, 4), extra_inputs=[("flex/Q", (1, 2, 3, 3))],
                       score_mod=_modifier("outer_bias", [add], ["s"], ["s_out"]))
    feeds = _feeds(model)
    inner = _modifier("inner_bias", [_const("flex/Q", feeds["flex/Q"]), add], ["s"], ["s_out"])
    want_model = flex_model((1, 2, 3, 4), (1, 2, 3, 4), score_mod=inner)
    (want,) = ReferenceEvaluator(want_model).run(None, {k: feeds[k] for k in "QKV"})
    session = InferenceSession(model.SerializeToString(), backends=["cpu"], strict=True)
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-5, atol=1e-6)


def test_expanded_node_is_gone_and_named_in_placement() -> None:
    model = flex_model((1, 2, 3, 4), (1, 2, 3, 4), prob_mod=drop_small())
    session = InferenceSession(model.SerializeToString(), backends=["cpu"], strict=True)
    assert session.passes.expanded == 1
    assert all(n.op_type != "FlexAttention" for n in session.graph.nodes)
    assert any(n.name.startswith("flex/") and n.op_type == "Where" for n in session.graph.nodes)


def test_a_node_inside_an_if_branch_is_expanded() -> None:
    inner = flex_model((1, 2, 3, 4), (1, 2, 3, 4), score_mod=alibi_soft_cap())
    then = helper.make_graph(list(inner.graph.node), "then", [], list(inner.graph.output))
    other = helper.make_graph([helper.make_node("Identity", ["Q"], ["Y2"])], "else", [],
                              [helper.make_tensor_value_info("Y2", F, (1, 2, 3, 4))])
    branch = helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other)
    graph = helper.make_graph(
        [branch], "if_flex",
        [*inner.graph.input, helper.make_tensor_value_info("c", TensorProto.BOOL, ())],
        [helper.make_tensor_value_info("out", F, (1, 2, 3, 4))])
    model = helper.make_model(graph, opset_imports=list(inner.opset_import))
    feeds = _feeds(inner)
    (want,) = ReferenceEvaluator(inner).run(None, feeds)
    session = InferenceSession(model.SerializeToString(), backends=["cpu"], strict=True)
    assert session.passes.expanded == 1
    got = session.run(None, {**feeds, "c": np.array(True)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _bad(attr: str, n_in: int, n_out: int) -> onnx.ModelProto:
    ins = [f"a{i}" for i in range(n_in)]
    outs = [f"b{i}" for i in range(n_out)]
    nodes = [helper.make_node("Identity", [ins[0]], [o]) for o in outs]
    return flex_model((1, 2, 3, 4), (1, 2, 3, 4), **{attr: _modifier("bad", nodes, ins, outs)})


@pytest.mark.parametrize("attr,n_in,n_out", [("score_mod", 2, 1), ("prob_mod", 1, 2),
                                             ("score_mod", 1, 0)])
def test_modifier_arity_is_checked(attr: str, n_in: int, n_out: int) -> None:
    with pytest.raises(InvalidModelError,
                       match=rf"FlexAttention node 'flex': attribute '{attr}' must be a graph "
                             rf"with 1 input and 1 output.*got {n_in} input\(s\) and {n_out}"):
        InferenceSession(_bad(attr, n_in, n_out).SerializeToString(), backends=["cpu"])


def test_modifier_rank_is_checked() -> None:
    nodes = [helper.make_node("Identity", ["s"], ["s_out"])]
    body = helper.make_graph(nodes, "flat", [helper.make_tensor_value_info("s", F, ["N"])],
                             [helper.make_tensor_value_info("s_out", F, ["N"])])
    model = flex_model((1, 2, 3, 4), (1, 2, 3, 4), score_mod=body)
    with pytest.raises(InvalidModelError, match=r"'flex'.*input 's' of attribute 'score_mod' "
                                                r"must be rank 4"):
        InferenceSession(model.SerializeToString(), backends=["cpu"])
