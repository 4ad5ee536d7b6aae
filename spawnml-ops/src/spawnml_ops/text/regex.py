"""RegexFullMatch: whether each string fully matches a regular expression."""

from __future__ import annotations

import re

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, OpDef, TensorInfo

from .common import as_str, string_input, strings


class RegexFullMatch(OpDef):
    """ONNX RegexFullMatch (opset 20): ``pattern`` in RE2 syntax, run with Python's ``re``
    (the RE2 subset exporters use: classes, quantifiers, groups, anchors)."""

    op_type = "RegexFullMatch"
    since_version = 20
    host_only = True

    def _pattern(self, node: Node) -> re.Pattern[str]:
        pattern = self.attr(node, "pattern", required=True)
        try:
            return re.compile(str(pattern))
        except re.error as exc:
            raise self.fail(node, f"pattern {pattern!r} is not a valid regular expression: "
                                  f"{exc}") from None

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = string_input(self, node, inputs)
        self._pattern(node)
        return [TensorInfo(DType.bool, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_str(inputs[0])
        pattern = self._pattern(node)
        flat = [pattern.fullmatch(s) is not None for s in x.reshape(-1)]
        return [np.array(flat, dtype=bool).reshape(x.shape)]

    def cases(self) -> list[OpCase]:
        x = strings((2, 2), ["www.google.com", "www.facebook.com", "www.bbc.co.uk", ""])
        return [OpCase("domains", [x], {"pattern": r"www\.[\w.-]+\.\bcom\b"}),
                OpCase("empty_pattern", [x], {"pattern": ""})]
