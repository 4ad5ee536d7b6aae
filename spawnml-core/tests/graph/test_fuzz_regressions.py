"""Classes of failure the fuzzers of issue #20 (``scripts/fuzz.py``) found, one test per class:
each failed (a foreign exception, or a wrong answer) before its fix.

Valid models are compared with onnxruntime on every available backend; invalid ones must be
refused with the specific SpawnMLError, as onnxruntime refuses them.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper, numpy_helper

from spawnml import InferenceSession, InvalidModelError, get_available_backends
from spawnml.errors import OutOfMemoryError
from spawnml.memory import host_memory_errors

I64 = TensorProto.INT64
BACKENDS = [b for b in ("cpu", "opencl", "webgpu", "webgl", "wasm") if b in
            get_available_backends()]


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _same_as_onnxruntime(model, feeds, backend: str) -> None:
    expected = _ort(model, feeds)
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        got = session.run(None, feeds)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


# -- zero-size intermediates: fusion and the cpu fast kernels ---------------------------------
ZERO_SIZE = {
    # a Slice that empties every axis feeds a CumSum then an Expand (fusion met a producer
    # with no launches: ValueError in graph/fuse.py)
    "slice_cumsum_expand": make_model(
        [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
         helper.make_node("CumSum", ["s", "axis"], ["c"], reverse=1),
         helper.make_node("Expand", ["c", "shape"], ["y"])],
        [("x", F, [1, 1, 4])], [("y", F, None)],
        {"st": np.array([-3, -2, 0], np.int64), "en": np.array([2, 1, -6], np.int64),
         "ax": np.array([0, -2, -1], np.int64), "sp": np.array([-1, -1, 1], np.int64),
         "axis": np.array(1, np.int64), "shape": np.zeros(3, np.int64)}),
    # Softmax over a zero-size tensor (numpy's max of an empty array in the cpu fast kernel)
    "split_softmax": make_model(
        [helper.make_node("Split", ["x", "parts"], ["a", "b"], axis=1),
         helper.make_node("Softmax", ["a"], ["y"], axis=0)],
        [("x", F, [2, 3])], [("y", F, None), ("b", F, None)],
        {"parts": np.array([0, 3], np.int64)}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_size_intermediates_match_onnxruntime(name, backend):
    x = np.random.default_rng(0).standard_normal(
        [d.dim_value for d in ZERO_SIZE[name].graph.input[0].type.tensor_type.shape.dim]
    ).astype(np.float32)
    _same_as_onnxruntime(ZERO_SIZE[name], {"x": x}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_to_a_zero_size_output(backend):
    """sizes with a 0 (onnxruntime refuses scale 0; ONNX allows it): an empty result, where
    the cpu fast kernel reshaped an empty array into an impossible shape."""
    model = make_model(
        [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")],
        [("x", F, [1, 2, 4, 4])], [("y", F, None)], {"sizes": np.array([1, 2, 3, 0], np.int64)},
        opset=19)
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        (y,) = session.run(None, {"x": np.ones((1, 2, 4, 4), np.float32)})
    assert y.shape == (1, 2, 3, 0) and y.dtype == np.float32


STRIDE_CASES = {
    # an INT64_MAX stride: the cpu kernel split the input into stride x stride phases
    "int64_max": ([1, 2, 6, 6], [3, 2, 3, 3], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                               "strides": [2**63 - 1, 1]}),
    # a 1x1 kernel whose stride skips the rest of the input: not the pointwise (stride 1) path
    "pointwise_skipping": ([5, 1, 2], [2, 1, 1], {"kernel_shape": [1], "strides": [2],
                                                   "auto_pad": "SAME_LOWER"}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(STRIDE_CASES))
def test_conv_with_a_stride_beyond_the_input(name, backend):
    """One output along an axis whatever the stride."""
    x_shape, w_shape, attrs = STRIDE_CASES[name]
    w = np.random.default_rng(1).standard_normal(w_shape).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)],
                       [("x", F, x_shape)], [("y", F, None)], {"w": w})
    x = np.random.default_rng(2).standard_normal(x_shape).astype(np.float32)
    _same_as_onnxruntime(model, {"x": x}, backend)


# -- shape-like inputs, Pad values and Resize targets: refused, never a numpy error -----------
def _refused(model, match: str) -> None:
    with pytest.raises(InvalidModelError, match=match):
        InferenceSession(model.SerializeToString(), backends="cpu")


@pytest.mark.parametrize("op,inputs,init", [
    ("Pad", ["x", "v"], {"v": np.zeros((8, 1), np.int64)}),
    ("Reshape", ["x", "v"], {"v": np.array([[4, 4]], np.int64)}),
    ("Tile", ["x", "v"], {"v": np.ones((2, 1), np.int64)}),
    ("Expand", ["x", "v"], {"v": np.ones((1, 2), np.int64)}),
])
def test_shape_like_inputs_of_rank_two_are_refused(op, inputs, init):
    model = make_model([helper.make_node(op, inputs, ["y"])], [("x", F, [4, 4])],
                       [("y", F, None)], init)
    _refused(model, "must be a 1-D tensor")


def test_pad_constant_value_must_be_a_scalar():
    model = make_model(
        [helper.make_node("Pad", ["x", "pads", "value"], ["y"])], [("x", F, [2, 2])],
        [("y", F, None)],
        {"pads": np.ones(4, np.int64), "value": np.zeros((2, 2), np.float32)})
    _refused(model, "constant_value must be a scalar")


@pytest.mark.parametrize("scales,sizes,match", [
    (None, [1, 2, -5, 4], "sizes must not be negative"),
    ([1, 1, np.nan, 2], None, "positive and finite"),
    ([1, 1, np.inf, 2], None, "positive and finite"),
])
def test_resize_targets_are_checked(scales, sizes, match):
    inits = {"roi": np.zeros(0, np.float32)}
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
    else:
        inits["scales"] = np.zeros(0, np.float32)
        inits["sizes"] = np.array(sizes, np.int64)
    inputs = ["x", "roi", "scales"] + (["sizes"] if sizes is not None else [])
    model = make_model([helper.make_node("Resize", inputs, ["y"])], [("x", F, [1, 2, 4, 4])],
                       [("y", F, None)], inits, opset=19)
    _refused(model, match)


# -- sparse initializers and host allocations ------------------------------------------------
def _sparse_model(dims, values, indices):
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.asarray(values, np.float32), "s"),
        numpy_helper.from_array(np.asarray(indices, np.int64), "s_idx"), dims)
    model = make_model([helper.make_node("Add", ["x", "s"], ["y"])], [("x", F, [2])],
                       [("y", F, None)])
    model.graph.sparse_initializer.append(sparse)
    return model


@pytest.mark.parametrize("dims,values,indices,error,match", [
    ([2**31, 10**9], [1.0], [0], OutOfMemoryError, "sparse initializer 's'"),
    ([3, 2**31], [1.0], [0, 1, 2], InvalidModelError, "expected indices of shape"),
    ([2**62, 2], [1.0, 2.0], [[0, 0], [1, 5]], InvalidModelError, "index outside its dims"),
    ([4], [1.0], [-1], InvalidModelError, "index outside its dims"),
])
def test_sparse_initializers_are_checked_before_allocating(dims, values, indices, error, match):
    with pytest.raises(error, match=match):
        InferenceSession(_sparse_model(dims, values, indices).SerializeToString(), backends="cpu")


def test_a_valid_sparse_initializer_is_densified():
    model = _sparse_model([2], [5.0], [1])
    with InferenceSession(model.SerializeToString(), backends="cpu") as session:
        (y,) = session.run(None, {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(y, [1.0, 6.0])


def test_a_refused_host_allocation_is_out_of_memory():
    with pytest.raises(OutOfMemoryError, match="loading the model: the host refused"):
        with host_memory_errors("loading the model"):
            np.empty(2**40, np.float32)  # 4 TiB: numpy's MemoryError


# -- valid models spawnml refused, invalid ones it ran ------------------------------------------
def _if_model_with_untyped_branch_outputs():
    then = helper.make_graph([helper.make_node("Identity", ["y"], ["t"])], "then", [],
                             [helper.make_empty_tensor_value_info("t")])
    other = helper.make_graph([helper.make_node("Neg", ["y"], ["e"])], "else", [],
                              [helper.make_empty_tensor_value_info("e")])
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"]),
         helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=other)],
        [("x", F, [2, 3]), ("cond", TensorProto.BOOL, [])], [("z", F, None)])
    return model


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_with_untyped_outputs_take_the_inferred_types(cond):
    """onnx infers the branch outputs from the outer scope; the If's own inference cannot
    see it (refused with "the type of subgraph output 't' is unknown")."""
    model = _if_model_with_untyped_branch_outputs()
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    _same_as_onnxruntime(model, {"x": x, "cond": np.array(cond)}, "cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_output_listed_twice_is_returned_twice(backend):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [3])],
                       [("y", F, [3]), ("y", F, [3])])
    x = np.array([-1, 0, 2], np.float32)
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        for _ in range(3):  # plan, record, replay
            a, b = session.run(None, {"x": x})
            np.testing.assert_array_equal(a, [0, 0, 2])
            np.testing.assert_array_equal(b, [0, 0, 2])
    _same_as_onnxruntime(model, {"x": x}, backend)


def test_an_output_declared_with_another_element_type_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [3])],
                       [("y", TensorProto.FLOAT16, [3])])
    with pytest.raises(InvalidModelError, match="declared float16 but computed as float32"):
        InferenceSession(model.SerializeToString(), backends="cpu")


@pytest.mark.parametrize("change,match", [
    (lambda m: setattr(m, "ir_version", 99), "IR version 99 is newer"),
    (lambda m: setattr(m.opset_import[0], "version", 10**6), "version 1000000"),
    (lambda m: setattr(m.opset_import[0], "version", 0), "version 0"),
    (lambda m: m.opset_import.add(domain="ai.onnx", version=17), "more than once"),
])
def test_versions_onnxruntime_refuses_are_refused(change, match):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [3])],
                       [("y", F, [3])])
    change(model)
    _refused(model, match)


def test_reflect_pads_beyond_the_axis_are_refused():
    model = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
                       [("x", F, [2, 4])], [("y", F, None)],
                       {"pads": np.array([0, 4, 0, 0], np.int64)})
    _refused(model, "reflect pads")


# -- C pow on every backend ---------------------------------------------------------------------
SPECIAL = np.array([np.inf, -np.inf, 0.0, -0.0, 4.0, -4.0, np.nan, 1.0, -1.0, 0.5, -2.0],
                   np.float32)
EXPONENTS = np.array([0.5, 2.0, -0.5, 3.0, -3.0, -1.0, np.inf, -np.inf, 0.0, np.nan, 1e10],
                     np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_of_every_special_pair_matches_onnxruntime(backend):
    """C pow (onnxruntime's std::pow): pow(-inf, 0.5) = inf (was NaN everywhere),
    pow(+-0, -0.5) = inf and pow(-1, +-inf) = 1 (0 and NaN on webgpu/webgl), signs of zeros
    and infinities included."""
    x, y = (a.ravel() for a in np.meshgrid(SPECIAL, EXPONENTS))
    model = make_model([helper.make_node("Pow", ["x", "y"], ["z"])],
                       [("x", F, [x.size]), ("y", F, [y.size])], [("z", F, None)])
    (expected,) = _ort(model, {"x": x, "y": y})
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        (got,) = session.run(None, {"x": x, "y": y})
    same = (np.isclose(got, expected, rtol=1e-5) & (np.signbit(got) == np.signbit(expected))) \
        | (np.isnan(got) & np.isnan(expected))
    assert same.all(), list(zip(x[~same], y[~same], got[~same], expected[~same]))


# -- nodes inference refuses are not folded into numpy errors; names are UTF-8 ------------------
@pytest.mark.parametrize("node,inits,match", [
    # Gemm whose first input was dropped: B (5, 4) and C (5,) do not multiply
    (helper.make_node("Gemm", ["b", "c"], ["y"]),
     {"b": np.ones((5, 4), np.float32), "c": np.ones(5, np.float32)}, "must be 2-D"),
    # Concat of a constant and an omitted input
    (helper.make_node("Concat", ["b", ""], ["y"], axis=0),
     {"b": np.ones((2, 2), np.float32)}, "Concat"),
])
def test_constant_nodes_that_inference_refuses_give_its_error(node, inits, match):
    model = make_model([node, helper.make_node("Add", ["y", "x"], ["z"])],
                       [("x", F, [1])], [("z", F, None)], inits)
    with pytest.raises(InvalidModelError, match=match):
        InferenceSession(model.SerializeToString(), backends="cpu")


def test_names_that_are_not_utf8_are_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2])],
                       [("y", F, [2])])
    data = model.SerializeToString().replace(b"Relu", b"R\xfflu")
    with pytest.raises(InvalidModelError, match="not valid UTF-8"):
        InferenceSession(data, backends="cpu")


# -- Pad with negative pads overlapping positive ones -------------------------------------------
PAD_CASES = [[1, 0, -2, 2], [2, 0, -2, 0], [-1, 0, 2, 0], [2, 0, -3, 0], [-1, 1, 0, 1],
             [1, -1, 1, 2]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("pads", PAD_CASES, ids=str)
def test_pad_with_crops_matches_onnxruntime_or_is_refused_like_it(pads, mode, backend):
    """Constant mode pads then crops (a crop may eat the fill: the cpu kernel cropped first
    and broadcast a wrong shape); edge/reflect crop first and need 1/2 elements left, or
    are refused, as onnxruntime refuses them."""
    model = make_model([helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)],
                       [("x", F, [2, 3])], [("y", F, None)],
                       {"pads": np.array(pads, np.int64), "v": np.array(9, np.float32)})
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    try:
        (expected,) = _ort(model, {"x": x})
    except Exception:  # noqa: BLE001 - onnxruntime refuses: so must spawnml
        with pytest.raises(InvalidModelError, match="pads"):
            InferenceSession(model.SerializeToString(), backends=backend)
        return
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        (got,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(got, expected)


# -- NaN and infinities through pooling and resizing ----------------------------------------------
NAN_PLANES = np.array([1, np.nan, 3, -np.inf, np.nan, np.nan, 2, 5, np.nan, np.nan, np.nan,
                       np.nan], np.float32).reshape(1, 3, 2, 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,attrs", [("GlobalMaxPool", {}),
                                      ("MaxPool", {"kernel_shape": [2, 2]})])
def test_max_pooling_skips_nan_unless_every_tap_is_nan(op, attrs, backend):
    """As onnxruntime: NaN skipped, NaN for an all-NaN window (GlobalMaxPool propagated any
    NaN on the portable path and skipped it in the cpu kernel; an all-NaN MaxPool window
    gave -inf on the portable path and NaN on cpu)."""
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, [1, 3, 2, 2])],
                       [("y", F, None)])
    (expected,) = _ort(model, {"x": NAN_PLANES})
    with InferenceSession(model.SerializeToString(), backends=backend) as session:
        (got,) = session.run(None, {"x": NAN_PLANES})
    np.testing.assert_array_equal(got, expected)
