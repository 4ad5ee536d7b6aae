"""ZipMap: each row of class probabilities as a {label: probability} map, the output of
skl2onnx classifiers by default (a sequence of maps, as onnxruntime returns it: a list of
dicts). Made on the host: no backend stores a map."""

from __future__ import annotations

from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node
from spawnml.values import SequenceInfo

from .common import MLOp


class ZipMap(MLOp):
    op_type = "ZipMap"
    since_version = 1

    def _labels(self, node: Node) -> list[Any]:
        strings = node.attrs.get("classlabels_strings")
        ints = node.attrs.get("classlabels_int64s")
        if (strings is None) == (ints is None):
            raise self.fail(node, "exactly one of classlabels_strings and classlabels_int64s "
                                  "must be given")  # fmt: skip
        if strings is not None:
            return [s.decode() if isinstance(s, bytes) else str(s) for s in strings]
        return [int(i) for i in ints]

    def infer(self, node: Node, inputs, values) -> list[SequenceInfo]:
        x = self.features(node, inputs, types=(DType.float32,))
        labels = self._labels(node)
        if x.shape is not None and isinstance(x.shape[-1], int) and x.shape[-1] != len(labels):
            raise self.fail(node, f"{len(labels)} class labels for {x.shape[-1]} columns")
        return [SequenceInfo(None)]

    def reference(self, node: Node, inputs) -> list[Any]:
        labels = self._labels(node)
        x = np.asarray(inputs[0], np.float32)
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        if rows.shape[1] != len(labels):
            raise self.fail(node, f"{len(labels)} class labels for {rows.shape[1]} columns")
        return [[{k: float(v) for k, v in zip(labels, row)} for row in rows]]
