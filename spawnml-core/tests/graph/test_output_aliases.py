"""Outputs that alias another output or a graph input (Identity, Reshape, Flatten, Squeeze,
Reshape to Shape(input)), and one output requested twice: every result equals onnxruntime's
and every returned DeviceTensor is its own handle, readable whatever else was closed first
(the other outputs, the feeds), on the normal path and on recorded replays (issue #20)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from graph_helpers import F, make_model
from onnx import helper

from spawnml import DeviceTensor, InferenceSession, get_available_backends
from spawnml.errors import InvalidInputError

BACKENDS = [b for b in ("cpu", "wasm", "webgpu") if b in get_available_backends()]
X = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
W = np.linspace(-1, 3, 24, dtype=np.float32)
S64 = np.array([6, 4], np.int64)


@dataclass
class Case:
    """A model, its feeds and the names a run asks for (None: every output)."""

    model: Any
    feeds: dict[str, np.ndarray]
    names: list[str] | None = None


def node(op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs, **attrs)


def relu_then(op: str, extra: list[str], out_shape: list[int], inits: dict | None = None,
              **attrs: Any) -> Case:  # fmt: skip
    """y = Relu(x), z = op(y): z aliases the output y."""
    nodes = [node("Relu", ["x"], ["y"]), node(op, ["y", *extra], ["z"], **attrs)]
    outputs = [("y", F, [2, 3, 4]), ("z", F, out_shape)]
    return Case(make_model(nodes, [("x", F, [2, 3, 4])], outputs, inits), {"x": X})


def squeeze_of_output() -> Case:
    nodes = [node("Relu", ["x"], ["y"]), node("Squeeze", ["y", "a"], ["z"])]
    outputs = [("y", F, [1, 24]), ("z", F, [24])]
    model = make_model(nodes, [("x", F, [1, 24])], outputs, {"a": np.array([0], np.int64)})
    return Case(model, {"x": X.reshape(1, 24)})


def of_input(nodes: list, outputs: list, inits: dict | None = None,
             names: list[str] | None = None) -> Case:  # fmt: skip
    """Outputs computed from the input x [2, 3, 4]."""
    return Case(make_model(nodes, [("x", F, [2, 3, 4])], outputs, inits), {"x": X}, names)


def shaped_like_input(relu: bool) -> Case:
    """y = Reshape(w or Relu(w), Shape(x)), x and w with symbolic dims."""
    nodes = [node("Shape", ["x"], ["sh"]), node("Reshape", ["r" if relu else "w", "sh"], ["y"])]
    outputs = [("y", F, ["N", 4])]
    if relu:
        nodes.insert(1, node("Relu", ["w"], ["r"]))
        outputs.append(("r", F, ["M"]))
    model = make_model(nodes, [("x", F, ["N", 4]), ("w", F, ["M"])], outputs)
    return Case(model, {"x": X.reshape(6, 4), "w": W})


def relu_model(names: list[str]) -> Case:
    model = make_model([node("Relu", ["x"], ["y"])], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])])
    return Case(model, {"x": X}, names)


CASES: dict[str, Callable[[], Case]] = {
    "identity_of_output": lambda: relu_then("Identity", [], [2, 3, 4]),
    "reshape_of_output": lambda: relu_then("Reshape", ["s"], [6, 4], {"s": S64}),
    "flatten_of_output": lambda: relu_then("Flatten", [], [2, 12], axis=1),
    "squeeze_of_output": squeeze_of_output,
    "identity_of_input": lambda: of_input(
        [node("Identity", ["x"], ["z"]), node("Relu", ["x"], ["y"])],
        [("z", F, [2, 3, 4]), ("y", F, [2, 3, 4])],
    ),
    "identity_chain_of_input": lambda: of_input(
        [node("Identity", ["x"], ["a"]), node("Identity", ["a"], ["b"])],
        [("a", F, [2, 3, 4]), ("b", F, [2, 3, 4])],
    ),
    "reshape_of_input": lambda: of_input(
        [node("Reshape", ["x", "s"], ["z"])], [("z", F, [6, 4])], {"s": S64}
    ),
    "reshape_to_shape_of_input": lambda: shaped_like_input(relu=False),
    "reshape_of_relu_to_shape_of_input": lambda: shaped_like_input(relu=True),
    "output_twice": lambda: relu_model(["y", "y"]),
    "view_output_twice": lambda: of_input(
        [node("Relu", ["x"], ["r"]), node("Reshape", ["r", "s"], ["y"])],
        [("y", F, [6, 4])],
        {"s": S64},
        ["y", "y"],
    ),
    "input_alias_twice_with_view": lambda: of_input(
        [node("Reshape", ["x", "s"], ["z"]), node("Relu", ["x"], ["y"])],
        [("z", F, [6, 4]), ("y", F, [2, 3, 4])],
        {"s": S64},
        ["z", "y", "z"],
    ),
}


def _expected(case: Case) -> list[np.ndarray]:
    ref = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return ref.run(case.names, case.feeds)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_host_results_equal_onnxruntime(backend: str, name: str) -> None:
    case = CASES[name]()
    expected = _expected(case)
    session = InferenceSession(case.model.SerializeToString(), backends=[backend])
    for _ in range(3):  # normal path, recording, replay
        got = session.run(case.names, case.feeds)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("order", ["first_closed_first", "last_closed_first"])
def test_device_results_close_in_any_order(backend: str, name: str, order: str) -> None:
    case = CASES[name]()
    expected = _expected(case)
    session = InferenceSession(case.model.SerializeToString(), backends=[backend])
    for _ in range(3):
        got = session.run(case.names, case.feeds, device=True)
        assert all(isinstance(t, DeviceTensor) for t in got)
        indices = list(range(len(got)))
        if order == "last_closed_first":
            indices.reverse()
        for i in indices:  # read each one after closing every one before it
            np.testing.assert_array_equal(got[i].numpy(), expected[i])
            got[i].close()
        assert all(t.closed for t in got)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "name",
    [
        "identity_of_input",
        "reshape_of_input",
        "reshape_to_shape_of_input",
        "input_alias_twice_with_view",
    ],
)
def test_results_aliasing_a_device_feed_outlive_the_feed(backend: str, name: str) -> None:
    case = CASES[name]()
    expected = _expected(case)
    session = InferenceSession(case.model.SerializeToString(), backends=[backend])
    target = session.backends[0]
    for _ in range(3):
        feeds = {k: DeviceTensor.from_numpy(target, v) for k, v in case.feeds.items()}
        got = session.run(case.names, feeds, device=True)
        for t in feeds.values():
            t.close()  # the caller is done with its inputs
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g.numpy(), e)
            g.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_results_give_their_buffers_back(backend: str) -> None:
    """Every handle is counted: once all are closed, device memory is where it was."""
    case = CASES["input_alias_twice_with_view"]()
    session = InferenceSession(case.model.SerializeToString(), backends=[backend])
    pool = session.backends[0].pool
    live = []
    for _ in range(6):
        for t in session.run(case.names, case.feeds, device=True):
            t.close()
        session.run(case.names, case.feeds)
        live.append(pool.live_bytes)
    assert live[2:] == [live[2]] * 4, live


def test_a_repeated_name_gives_independent_host_arrays() -> None:
    case = CASES["output_twice"]()
    session = InferenceSession(case.model.SerializeToString(), backends=["cpu"])
    first, second = session.run(["y", "y"], case.feeds)
    first[...] = 7
    np.testing.assert_array_equal(second, np.maximum(X, 0))


def test_output_names_as_a_str_is_one_name() -> None:
    case = CASES["identity_of_output"]()
    session = InferenceSession(case.model.SerializeToString(), backends=["cpu"])
    (z,) = session.run("z", case.feeds)
    np.testing.assert_array_equal(z, np.maximum(X, 0))
    y, z = session.run([], case.feeds)  # an empty list: every output, as onnxruntime
    np.testing.assert_array_equal(y, z)


def test_unknown_or_non_str_output_names_are_refused_with_the_valid_ones() -> None:
    case = CASES["identity_of_output"]()
    session = InferenceSession(case.model.SerializeToString(), backends=["cpu"])
    valid = r"outputs are \['y', 'z'\]"
    with pytest.raises(InvalidInputError, match=r"unknown output name\(s\) \['w'\]; " + valid):
        session.run(["y", "w"], case.feeds)
    with pytest.raises(InvalidInputError, match=r"must be strings, got \[3\]; " + valid):
        session.run(["y", 3], case.feeds)  # type: ignore[list-item]
