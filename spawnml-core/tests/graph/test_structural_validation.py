"""Malformed nodes and tensors are refused at import with InvalidModelError naming the node
and the field (issue #20), the way onnxruntime refuses them, before any op, constant
folding or onnx's C++ shape inference reads them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from graph_helpers import F, make_model
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from spawnml import InferenceSession, InvalidModelError


def _ort_refuses(model: onnx.ModelProto) -> bool:
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any load failure
        return True
    return False


def _attr(name: str, kind: int, value) -> AttributeProto:
    a = AttributeProto()
    a.name, a.type = name, kind
    if kind == AttributeProto.INT:
        a.i = value
    elif kind == AttributeProto.INTS:
        a.ints.extend(value)
    elif kind == AttributeProto.STRING:
        a.s = value
    elif kind == AttributeProto.FLOAT:
        a.f = value
    return a


def _softmax(inputs=("x",), outputs=("y",), attrs=()) -> onnx.ModelProto:
    node = helper.make_node("Softmax", list(inputs), list(outputs), name="sm")
    node.attribute.extend(attrs)
    return make_model([node], [("x", F, [2, 3])], [("y", F, [2, 3])])


MALFORMED = [
    ("two-input Softmax", _softmax(inputs=("x", "x")), "takes 1 inputs, got 2"),
    ("no input", _softmax(inputs=()), "takes 1 inputs, got 0"),
    ("empty required input", _softmax(inputs=("",)), "input 0 (input) is required"),
    ("two outputs", _softmax(outputs=("y", "z")), "takes 1 outputs, got 2"),
    ("INTS for INT", _softmax(attrs=[_attr("axis", AttributeProto.INTS, [1])]),
     "attribute 'axis' must be INT, got INTS"),
    ("STRING for INT", _softmax(attrs=[_attr("axis", AttributeProto.STRING, b"1")]),
     "attribute 'axis' must be INT, got STRING"),
    ("UNDEFINED", _softmax(attrs=[_attr("axis", AttributeProto.UNDEFINED, None)]),
     "got UNDEFINED"),
    ("unknown attribute", _softmax(attrs=[_attr("axes", AttributeProto.INT, 1)]),
     "unknown attribute 'axes'"),
    ("attribute twice", _softmax(attrs=[_attr("axis", AttributeProto.INT, 1)] * 2),
     "given twice"),
    ("required attribute", make_model([helper.make_node("Cast", ["x"], ["y"], name="c")],
                                      [("x", F, [2])], [("y", F, [2])]),
     "required attribute 'to' is missing"),
]


@pytest.mark.parametrize(("model", "message"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_node_is_refused_naming_node_and_field(model, message: str) -> None:
    assert _ort_refuses(model)  # the same models onnxruntime calls invalid
    with pytest.raises(InvalidModelError, match=r"node .*(sm|c)") as info:
        InferenceSession(model, ["cpu"])
    assert message in str(info.value)


def test_optional_inputs_may_be_omitted_or_empty() -> None:
    # Clip(x, "", max): the empty optional min is fine; trailing optionals may be left out
    nodes = [helper.make_node("Clip", ["x", "", "hi"], ["y"]),
             helper.make_node("Clip", ["y"], ["z"])]
    model = make_model(nodes, [("x", F, [3])], [("z", F, [3])],
                       {"hi": np.array(0.5, np.float32)})
    x = np.array([-1.0, 0.2, 2.0], np.float32)
    (z,) = InferenceSession(model, ["cpu"]).run(None, {"x": x})
    np.testing.assert_array_equal(z, np.array([-1.0, 0.2, 0.5], np.float32))


def test_duplicate_graph_input_names_are_refused() -> None:
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"])],
                       [("x", F, [2]), ("x", F, [2])], [("y", F, [2])])
    with pytest.raises(InvalidModelError, match="graph input 'x' is declared more than once"):
        InferenceSession(model, ["cpu"])


def test_negative_initializer_dims_are_refused() -> None:
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [2])],
                       [("y", F, [2])], {"w": np.ones(2, np.float32)})
    model.graph.initializer[0].dims[0] = -2
    with pytest.raises(InvalidModelError, match="initializer 'w' has negative dims"):
        InferenceSession(model, ["cpu"])


def test_raw_data_of_the_wrong_length_is_refused() -> None:
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [2])],
                       [("y", F, [2])], {"w": np.ones(2, np.float32)})
    model.graph.initializer[0].dims[0] = 10**12  # would be a 4 TB tensor
    with pytest.raises(InvalidModelError, match="8 bytes of raw data"):
        InferenceSession(model, ["cpu"])


def test_sparse_initializer_with_negative_dims_is_refused() -> None:
    values = numpy_helper.from_array(np.ones(1, np.float32), "w")
    indices = numpy_helper.from_array(np.zeros(1, np.int64), "w_idx")
    sparse = helper.make_sparse_tensor(values, indices, [-3])
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [3])],
                       [("y", F, [3])])
    model.graph.sparse_initializer.append(sparse)
    with pytest.raises(InvalidModelError, match="negative dims"):
        InferenceSession(model, ["cpu"])


def _external(tmp_path, location: str, length: int | None) -> str:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "4"}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [4])],
                       [("y", F, [4])])
    model.graph.initializer.append(w)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_external_data_without_length_reads_only_the_tensor(tmp_path) -> None:
    # 4 floats at offset 4 of a 1 MiB file: onnxruntime reads 16 bytes; so must we
    blob = np.arange(2**18, dtype=np.float32)
    (tmp_path / "big.bin").write_bytes(blob.tobytes())
    path = _external(tmp_path, "big.bin", None)
    (y,) = InferenceSession(path, ["cpu"]).run(None, {"x": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


def test_external_data_length_must_match_the_shape(tmp_path) -> None:
    (tmp_path / "big.bin").write_bytes(b"\0" * 64)
    with pytest.raises(InvalidModelError, match="length 32 does not match"):
        InferenceSession(_external(tmp_path, "big.bin", 32), ["cpu"])


@pytest.mark.parametrize("location", ["we\0ights.bin", "w\udcffx.bin"])
def test_unreadable_external_location_is_refused(tmp_path, location: str) -> None:
    try:
        path = _external(tmp_path, location, 16)
    except (ValueError, UnicodeError):
        pytest.skip("protobuf refuses to store this location")
    with pytest.raises(InvalidModelError, match="initializer 'w'"):
        InferenceSession(path, ["cpu"])


def test_negative_input_dims_do_not_abort_the_process() -> None:
    # onnx's C++ shape inference aborts on a Slice over a dim_value -1 axis; the importer
    # must never hand it such a model (run in a subprocess: an abort kills the interpreter)
    code = textwrap.dedent("""
        import numpy as np, onnx
        from onnx import helper, TensorProto, numpy_helper
        from spawnml import InferenceSession
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, -1])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        consts = [numpy_helper.from_array(np.array([v], np.int64), n)
                  for n, v in (("s", 0), ("e", 2), ("a", 1))]
        g = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])],
                              "g", [x], [y], consts)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        x = np.arange(15, dtype=np.float32).reshape(3, 5)
        (out,) = InferenceSession(m, ["cpu"]).run(None, {"x": x})
        assert np.array_equal(out, x[:, :2]), out
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
