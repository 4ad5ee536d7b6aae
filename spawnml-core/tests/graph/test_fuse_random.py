"""Random graphs of elementwise, broadcast, view, transpose, MatMul and reduction nodes, with
values read several times and intermediate graph outputs: the fused plan must match
onnxruntime on every portable backend (fixed seeds, so a failure reproduces)."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import F, make_model
from onnx import TensorProto, helper

from spawnml import InferenceSession, get_available_backends

ort = pytest.importorskip("onnxruntime")
BACKENDS = [b for b in ("cpu", "opencl", "wasm") if b in get_available_backends()]
SEEDS = 24
UNARY = ["Relu", "Sigmoid", "Neg", "Abs", "Tanh", "Exp"]
BINARY = ["Add", "Mul", "Sub", "Max"]


def random_graph(seed: int):
    """A model over ``x`` (2, 3, 4) built from random nodes, and its feeds."""
    rng = np.random.default_rng(seed)
    values = {"x": (2, 3, 4)}
    nodes, inits = [], {}
    for n in range(int(rng.integers(4, 9))):
        name = f"v{n}"
        # mostly chains (what fuses), sometimes a second reader of an older value
        src = list(values)[-1] if rng.random() < 0.6 else str(rng.choice(list(values)))
        shape = values[src]
        kind = rng.integers(0, 10)
        if kind == 0:
            op = str(rng.choice(UNARY))
            nodes.append(helper.make_node(op, [src], [name], name=f"{op}{n}"))
        elif kind == 1:
            op = str(rng.choice(BINARY))
            same = [v for v, s in values.items() if s == shape]
            if rng.random() < 0.5:
                other = str(rng.choice(same))
            else:
                other = f"c{n}"
                inits[other] = rng.standard_normal(shape[-1:]).astype(np.float32)
            nodes.append(helper.make_node(op, [src, other], [name], name=f"{op}{n}"))
        elif kind == 2:
            perm = [int(p) for p in rng.permutation(len(shape))]
            nodes.append(helper.make_node("Transpose", [src], [name], perm=perm, name=f"T{n}"))
            shape = tuple(shape[p] for p in perm)
        elif kind == 3:
            new = (int(np.prod(shape[:-1])), shape[-1])
            inits[f"s{n}"] = np.array(new, np.int64)
            nodes.append(helper.make_node("Reshape", [src, f"s{n}"], [name], name=f"R{n}"))
            shape = new
        elif kind == 4:
            k = shape[-1]
            inits[f"w{n}"] = rng.standard_normal((k, 4)).astype(np.float32)
            nodes.append(helper.make_node("MatMul", [src, f"w{n}"], [name], name=f"M{n}"))
            shape = (*shape[:-1], 4)
        elif kind == 5:
            nodes.append(helper.make_node("ReduceSum", [src, f"a{n}"], [name], keepdims=1,
                                          name=f"S{n}"))  # fmt: skip
            inits[f"a{n}"] = np.array([-1], np.int64)
            shape = (*shape[:-1], 1)
        elif kind == 6:
            nodes.append(helper.make_node("Softmax", [src], [name], axis=-1, name=f"X{n}"))
        elif kind == 7:
            same = [v for v, s in values.items() if s == shape]
            other = str(rng.choice(same))
            nodes.append(helper.make_node("Concat", [src, other], [name], axis=-1, name=f"C{n}"))
            shape = (*shape[:-1], 2 * shape[-1])
        elif kind == 8:  # an int32 and a bool intermediate: Where(x > 0, Cast(Cast(x)), x)
            nodes += [
                helper.make_node("Cast", [src], [f"{name}i"], to=TensorProto.INT32, name=f"I{n}"),
                helper.make_node("Cast", [f"{name}i"], [f"{name}f"], to=F, name=f"J{n}"),
                helper.make_node("Greater", [src, f"z{n}"], [f"{name}b"], name=f"G{n}"),
                helper.make_node("Where", [f"{name}b", f"{name}f", src], [name], name=f"W{n}"),
            ]
            inits[f"z{n}"] = np.float32(0.25)
        else:
            nodes.append(helper.make_node("Sqrt", [src], [f"{name}s"], name=f"Q{n}"))
            nodes.append(helper.make_node("Abs", [f"{name}s"], [name], name=f"B{n}"))
        values[name] = shape
    produced = [v for v in values if v != "x"]
    outs = {produced[-1]} | {str(v) for v in rng.choice(produced, 1)}
    model = make_model(
        nodes, [("x", F, [2, 3, 4])], [(o, F, list(values[o])) for o in sorted(outs)], inits
    )
    return model, {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_graph_fuses_correctly(backend, seed, monkeypatch):
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")
    model, feeds = random_graph(seed)
    data = model.SerializeToString()
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    session = InferenceSession(data, backends=[backend])
    for _ in range(3):  # the second run records the plan, the third replays it
        got = session.run(None, feeds)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_the_random_graphs_do_fuse(monkeypatch):
    """The generator exercises fusion at all (so the test above tests something)."""
    monkeypatch.setenv("SPAWNML_CPU_FAST_KERNELS", "0")
    fused = 0
    for seed in range(SEEDS):
        model, _ = random_graph(seed)
        session = InferenceSession(model.SerializeToString(), backends=["cpu"])
        fused += len(session.placement().fused)
    assert fused >= 2 * SEEDS
