"""StringConcat (elementwise, broadcasting) and StringSplit (tokens padded to a tensor)."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, OpDef, TensorInfo

from ..common import broadcast_shapes
from .common import STRING, as_str, string_input, strings


class StringConcat(OpDef):
    """ONNX StringConcat (opset 20): ``X + Y`` per element, numpy broadcasting."""

    op_type = "StringConcat"
    since_version = 20
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = string_input(self, node, inputs, 0, "X")
        y = string_input(self, node, inputs, 1, "Y")
        return [TensorInfo(STRING, broadcast_shapes(node, x.shape, y.shape))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, y = as_str(inputs[0]), as_str(inputs[1])
        try:
            a, b = np.broadcast_arrays(x, y)
        except ValueError:
            raise self.fail(node, f"shapes {x.shape} and {y.shape} do not broadcast") from None
        return [strings(a.shape, [p + q for p, q in zip(a.reshape(-1), b.reshape(-1))])]

    def cases(self) -> list[OpCase]:
        x = strings((2, 2), ["a", "bé", "", "c d"])
        return [OpCase("same_shape", [x, strings((2, 2), ["1", "2", "", "3"])]),
                OpCase("broadcast", [x, strings((), ["!"])]),
                OpCase("utf8", [strings((1,), ["日本"]), strings((2,), ["語", ""])])]


class StringSplit(OpDef):
    """ONNX StringSplit (opset 20): ``Y`` holds each element's substrings along a new last
    axis (padded with empty strings to the longest), ``Z`` their counts (int64). No or an
    empty ``delimiter``: split on runs of whitespace; ``maxsplit``: at most that many
    splits (the rest stays in the last substring). An empty string has no substrings (as
    onnxruntime; onnx.reference gives one empty substring with a delimiter)."""

    op_type = "StringSplit"
    since_version = 20
    host_only = True

    def _maxsplit(self, node: Node) -> int:
        maxsplit = self.attr(node, "maxsplit")
        if maxsplit is None:
            return -1
        if int(maxsplit) < 0:
            raise self.fail(node, f"maxsplit must be >= 0, got {maxsplit}")
        return int(maxsplit)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = string_input(self, node, inputs)
        self._maxsplit(node)
        y = None if x.shape is None else (*x.shape, None)
        return [TensorInfo(STRING, y), TensorInfo(DType.int64, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_str(inputs[0])
        delimiter = self.attr(node, "delimiter") or None
        maxsplit = self._maxsplit(node)
        parts = [s.split(delimiter, maxsplit) if s else [] for s in x.reshape(-1)]
        width = max((len(p) for p in parts), default=0)
        y = strings((x.size, width))
        for i, p in enumerate(parts):
            y[i, : len(p)] = p
        counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
        return [y.reshape((*x.shape, width)), counts]

    def cases(self) -> list[OpCase]:
        x = strings((3,), ["a,b,,c", "", "x y"])
        words = strings((2,), ["  hello   world ", "one"])
        return [OpCase("comma", [x], {"delimiter": ","}, n_outputs=2),
                OpCase("comma_maxsplit", [x], {"delimiter": ",", "maxsplit": 1}, n_outputs=2),
                OpCase("whitespace", [words], n_outputs=2),
                OpCase("multi_char", [strings((1,), ["a::b::c"])], {"delimiter": "::"},
                       n_outputs=2)]
