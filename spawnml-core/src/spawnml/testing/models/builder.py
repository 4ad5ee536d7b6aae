"""A small ``onnx.helper`` graph builder with deterministic, well-scaled random weights.

Random deep networks explode or vanish unless their weights are scaled: convolutions and
matrices use He/LeCun initialisation (variance ``gain / fan_in``) so activations stay O(1)
layer after layer, and BatchNormalization gets running statistics close to what its input
really has (mean near 0, variance near 1), as a trained network's would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class GraphBuilder:
    """Accumulates nodes and initializers; every weight comes from one seeded generator."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counts: dict[str, int] = {}

    # -- naming and raw nodes -------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix: str, array: np.ndarray) -> str:
        """Add an initializer and return its name."""
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], n_outputs: int = 1, **attrs: Any) -> Any:
        """Add a node; returns its output name (or a list when ``n_outputs`` > 1)."""
        base = self.fresh(op_type.lower())
        outputs = [base] if n_outputs == 1 else [f"{base}_out{i}" for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=base, **attrs))
        return outputs[0] if n_outputs == 1 else outputs

    # -- random tensors -------------------------------------------------------------------
    def normal(self, shape: Sequence[int], std: float) -> np.ndarray:
        return (self.rng.standard_normal(tuple(shape)) * std).astype(np.float32)

    def uniform(self, shape: Sequence[int], low: float, high: float) -> np.ndarray:
        return self.rng.uniform(low, high, tuple(shape)).astype(np.float32)

    # -- layers ---------------------------------------------------------------------------
    def conv(
        self,
        x: str,
        c_in: int,
        c_out: int,
        kernel: int,
        *,
        stride: int = 1,
        pad: int | None = None,
        group: int = 1,
        bias: bool = True,
        gain: float = 2.0,
    ) -> str:
        """Conv with He-scaled weights (``gain`` 2 before ReLU, 1 before linear/tanh)."""
        fan_in = c_in // group * kernel * kernel
        w = self.const(
            "W", self.normal((c_out, c_in // group, kernel, kernel), np.sqrt(gain / fan_in))
        )
        inputs = [x, w]
        if bias:
            inputs.append(self.const("B", self.normal((c_out,), 0.02)))
        p = kernel // 2 if pad is None else pad
        return self.op(
            "Conv",
            inputs,
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[p, p, p, p],
            group=group,
        )

    def batchnorm(self, x: str, channels: int, *, gamma: tuple[float, float] = (0.8, 1.2)) -> str:
        """Running statistics near what a He-initialised conv produces (mean 0, var ~1)."""
        scale = self.const("bn_scale", self.uniform((channels,), *gamma))
        shift = self.const("bn_bias", self.normal((channels,), 0.1))
        mean = self.const("bn_mean", self.normal((channels,), 0.1))
        var = self.const("bn_var", self.uniform((channels,), 0.5, 1.5))
        return self.op("BatchNormalization", [x, scale, shift, mean, var], epsilon=1e-5)

    def instancenorm(self, x: str, channels: int) -> str:
        scale = self.const("in_scale", self.uniform((channels,), 0.8, 1.2))
        shift = self.const("in_bias", self.normal((channels,), 0.1))
        return self.op("InstanceNormalization", [x, scale, shift], epsilon=1e-5)

    def linear(self, x: str, n_in: int, n_out: int, *, gain: float = 1.0) -> str:
        """``x @ W + b`` as MatMul + Add (how exporters write dense layers in sequences)."""
        w = self.const("W", self.normal((n_in, n_out), np.sqrt(gain / n_in)))
        b = self.const("B", self.normal((n_out,), 0.02))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def gemm(self, x: str, n_in: int, n_out: int, *, gain: float = 1.0) -> str:
        """A classifier head as Gemm with a transposed weight (torch's nn.Linear layout)."""
        w = self.const("W", self.normal((n_out, n_in), np.sqrt(gain / n_in)))
        b = self.const("B", self.normal((n_out,), 0.02))
        return self.op("Gemm", [x, w, b], transB=1)

    def relu(self, x: str) -> str:
        return self.op("Relu", [x])

    def relu6(self, x: str) -> str:
        lo = self.const("clip_min", np.array(0.0, np.float32))
        hi = self.const("clip_max", np.array(6.0, np.float32))
        return self.op("Clip", [x, lo, hi])

    def ints(self, prefix: str, values: Sequence[int]) -> str:
        return self.const(prefix, np.array(list(values), np.int64))

    # -- the model ------------------------------------------------------------------------
    def model(
        self,
        inputs: Sequence[tuple[str, int, Sequence[int | str]]],
        outputs: Sequence[tuple[str, str, int, Sequence[int | str]]],
    ) -> onnx.ModelProto:
        """``inputs``: (name, elem type, shape); ``outputs``: (value, name, elem type, shape).

        Output values are renamed to ``name`` so models have stable output names."""
        graph_outputs = []
        for value, name, elem, shape in outputs:
            self._rename(value, name)
            graph_outputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(n, e, list(s)) for n, e, s in inputs],
            graph_outputs,
            initializer=self.initializers,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="spawnml.testing.models",
        )
        model.ir_version = 8  # what opset 17 exporters write; accepted by onnxruntime
        onnx.checker.check_model(model, full_check=True)
        return model

    def _rename(self, old: str, new: str) -> None:
        for node in self.nodes:
            for ios in (node.input, node.output):
                for i, name in enumerate(ios):
                    if name == old:
                        ios[i] = new


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
