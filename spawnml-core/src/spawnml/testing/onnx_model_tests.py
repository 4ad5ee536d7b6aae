"""The model test cases shipped in the ``onnx`` wheel, as cases for
:func:`spawnml.testing.onnx_session_tests.run_case` (through ``spawnml.onnx_backend``).

* ``simple``, ``pytorch-converted``, ``pytorch-operator``: small models with their data
  sets and expected outputs (compared within each case's own rtol/atol, as onnx's runner).
* ``light``: the nine zoo architectures of ``onnx/backend/test/data/light`` (AlexNet,
  DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512, all
  opset 9, IR 3). Their weights are placeholders built by ``ConstantOfShape`` (every class
  scores the same: the softmax is 0.001 everywhere, which a wrong Softmax can still hit),
  so each is also run with those weights replaced by seeded random ones
  (``*_random_weights``), where every layer's semantics shows in the output. Expected
  outputs come from onnxruntime on a seeded input.
"""

from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("simple", "pytorch-converted", "pytorch-operator")
LIGHT_RTOL, LIGHT_ATOL = 1e-3, 1e-5  # float32 through up to 120 layers, vs onnxruntime


@dataclass
class ModelCase:
    """What ``onnx_session_tests.run_case`` reads: a model, data sets, tolerances."""

    name: str
    model: Any
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]] = field(default_factory=list)
    rtol: float = 1e-3
    atol: float = 1e-7
    kind: str = ""


def _data_dir() -> str:
    import onnx.backend.test

    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")


def _load_tensor(path: str) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)


@functools.cache
def model_cases(kind: str) -> tuple[ModelCase, ...]:
    """Every case of one kind (``KINDS``), models and data sets loaded."""
    import onnx
    import onnx.backend.test.loader as loader

    out = []
    for test in loader.load_model_tests(kind=kind):
        model = onnx.load(os.path.join(test.model_dir, "model.onnx"))
        sets = []
        for folder in sorted(glob.glob(os.path.join(test.model_dir, "test_data_set*"))):
            ins = sorted(glob.glob(os.path.join(folder, "input_*.pb")),
                         key=lambda p: int(p.rsplit("_", 1)[1][:-3]))  # fmt: skip
            outs = sorted(glob.glob(os.path.join(folder, "output_*.pb")),
                          key=lambda p: int(p.rsplit("_", 1)[1][:-3]))  # fmt: skip
            sets.append(([_load_tensor(p) for p in ins], [_load_tensor(p) for p in outs]))
        out.append(ModelCase(test.name, model, sets, test.rtol, test.atol, kind))
    return tuple(out)


LIGHT = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512")  # fmt: skip


def light_path(name: str) -> str:
    return os.path.join(_data_dir(), "light", f"light_{name}.onnx")


def light_model(name: str, random_weights: bool = False) -> Any:
    """A light model as shipped, or with its ConstantOfShape weights made random."""
    import onnx

    model = onnx.load(light_path(name))
    return randomise_weights(model) if random_weights else model


def randomise_weights(model: Any, seed: int = 0) -> Any:
    """Every ``ConstantOfShape`` of an initializer shape becomes a seeded random initializer:
    He-scaled normal for tensors of rank >= 2, small normal for vectors, and U(0.5, 1.5)
    for BatchNormalization scales and variances (which must stay positive)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    positive = {n.input[k] for n in g.node if n.op_type == "BatchNormalization"
                for k in (1, 4) if len(n.input) > k}  # fmt: skip
    rng = np.random.default_rng(seed)
    keep, drop = [], set()
    for node in g.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
        out = node.output[0]
        if out in positive:
            value = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2:
            value = rng.standard_normal(shape) * np.sqrt(2.0 / max(1, int(np.prod(shape[1:]))))
        else:
            value = rng.standard_normal(shape) * 0.1
        g.initializer.append(numpy_helper.from_array(value.astype(np.float32), out))
        drop.add(node.input[0])
    del g.node[:]
    g.node.extend(keep)
    used = {i for n in g.node for i in n.input}
    kept_inits = [i for i in g.initializer if i.name not in drop or i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept_inits)
    names = {i.name for i in g.initializer}
    graph_inputs = [i for i in g.input if i.name not in drop and i.name not in names]
    del g.input[:]
    g.input.extend(graph_inputs)
    m.ir_version = max(m.ir_version, 4)  # initializers need not be graph inputs
    return m


def light_input(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded standard-normal image for the model's one real input."""
    inits = {i.name for i in model.graph.initializer}
    (inp,) = [i for i in model.graph.input if i.name not in inits]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return {inp.name: np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def _without_final_softmax(model: Any) -> Any:
    """``model`` whose outputs made by a last Softmax are that Softmax's input instead."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    last = {n.output[0]: n for n in g.node if n.op_type == "Softmax"}
    for out in g.output:
        node = last.get(out.name)
        if node is not None:
            g.node.remove(node)
            out.name = node.input[0]
    return m


@functools.cache
def light_case(name: str, random_weights: bool = False) -> ModelCase:
    """A light model with its expected output from onnxruntime (cpu provider).

    As shipped, a light model's weights are constants, so every class's logit is the same
    sum: they tie exactly, and at SqueezeNet's magnitudes (6.8e9, where one float32 ulp is
    512) its softmax is decided by how each implementation rounds those sums (OpenBLAS on an
    AVX-512 EPYC gives a few of 1000 identical rows a different last bit, and half the
    classes then get 1/512). So a shipped model is compared on its logits: its final
    Softmax is left out. The random weights keep the Softmax."""
    import onnxruntime as ort

    model = light_model(name, random_weights)
    if not random_weights:
        model = _without_final_softmax(model)
    feed = light_input(model)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    expected = session.run(None, feed)
    suffix = "_random_weights" if random_weights else ""
    return ModelCase(f"test_light_{name}{suffix}", model, [(list(feed.values()), expected)],
                     LIGHT_RTOL, LIGHT_ATOL, "light")  # fmt: skip


def light_cases() -> list[ModelCase]:
    return [light_case(n, r) for n in LIGHT for r in (False, True)]


def all_cases(kinds: tuple[str, ...] = ("light", *KINDS)) -> list[ModelCase]:
    """The cases of ``kinds`` (``light`` and those of ``KINDS``), in that order."""
    out: list[ModelCase] = []
    for kind in kinds:
        out.extend(light_cases() if kind == "light" else model_cases(kind))
    return out


def run_models(backend: str, kinds: tuple[str, ...] = ("light", *KINDS),
               timeout_s: int = 900) -> list[Any]:  # fmt: skip
    """``CaseResult`` of every model case on ``backend`` (``kind`` set on each)."""
    import time

    from .onnx_session_tests import run_case

    results = []
    for case in all_cases(kinds):
        start = time.perf_counter()
        result = run_case(backend, case, timeout_s)
        result.seconds = time.perf_counter() - start
        result.group = case.kind
        results.append(result)
    return results
