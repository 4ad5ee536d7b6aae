"""Inlining a graph into an enclosing scope (spawnml.graph.expand): renaming, outputs bound
to the caller's names, outer reads kept, nested graphs followed, the body left unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.errors import InvalidModelError
from spawnml.graph.expand import fresh_prefix, inline_graph
from spawnml.graph.ir import Graph, Value
from spawnml.op import Node


def _body() -> Graph:
    """(x) -> (y, x): y = (x + w) * outer, with a nested graph reading the local t."""
    nested = Graph([Node("Identity", ["t"], ["n"], name="inner")], [], [Value("n", None)])
    nodes = [
        Node("Add", ["x", "w"], ["t"], name="add"),
        Node("If", ["cond"], ["u"], name="if", subgraphs={"then_branch": nested}),
        Node("Mul", ["t", "outer"], ["y"]),
    ]
    return Graph(nodes, [Value("x", None)], [Value("y", None), Value("x", None)],
                 {"w": np.ones(2, np.float32)})


def test_names_are_prefixed_and_outputs_bound() -> None:
    got = inline_graph(_body(), ["a"], ["out0", "out1"], "call/")
    add, if_, mul, copy = got.nodes
    assert add.inputs == ["a", "call/w"] and add.outputs == ["call/t"]
    assert add.name == "call/add" and mul.name == "call/Mul"
    assert mul.inputs == ["call/t", "outer"] and mul.outputs == ["out0"]
    assert if_.inputs == ["cond"]  # read from outside: kept
    assert if_.subgraphs["then_branch"].nodes[0].inputs == ["call/t"]
    assert (copy.op_type, copy.inputs, copy.outputs) == ("Identity", ["a"], ["out1"])
    assert list(got.initializers) == ["call/w"]


def test_body_is_left_unchanged() -> None:
    body = _body()
    inline_graph(body, ["a"], ["out0", "out1"], "call/")
    assert body.nodes[0].inputs == ["x", "w"] and body.nodes[0].name == "add"
    assert body.nodes[1].subgraphs["then_branch"].nodes[0].inputs == ["t"]


def test_an_output_returned_twice_is_copied() -> None:
    body = Graph([Node("Neg", ["x"], ["y"])], [Value("x", None)],
                 [Value("y", None), Value("y", None)])
    got = inline_graph(body, ["a"], ["o1", "o2"], "p/")
    assert got.nodes[0].outputs == ["o1"]
    assert (got.nodes[1].inputs, got.nodes[1].outputs) == (["o1"], ["o2"])


def test_an_omitted_output_keeps_its_prefixed_name() -> None:
    body = Graph([Node("Neg", ["x"], ["y"])], [Value("x", None)], [Value("y", None)])
    assert inline_graph(body, ["a"], [""], "p/").nodes[0].outputs == ["p/y"]


def test_wrong_arity_is_refused() -> None:
    with pytest.raises(InvalidModelError, match=r"takes 1 input\(s\) and gives 2 output\(s\)"):
        inline_graph(_body(), ["a", "b"], ["o"], "p/")


def test_fresh_prefix_avoids_taken_names() -> None:
    assert fresh_prefix("n", ["x", "n"]) == "n/"
    assert fresh_prefix("n", ["n/a", "n#1/b"]) == "n#2/"
