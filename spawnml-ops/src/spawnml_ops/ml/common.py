"""What the ai.onnx.ml ops share: the domain, feature-input checks, attributes given as
lists or ``*_as_tensor`` tensors, and the score post-transforms (as onnxruntime computes
them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpDef, TensorInfo

ML_DOMAIN = "ai.onnx.ml"
FEATURE_TYPES = (DType.float32, DType.float64, DType.int64, DType.int32)
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


class MLOp(OpDef):
    """An ai.onnx.ml op: computed on the host by its numpy reference (declared)."""

    domain = ML_DOMAIN
    host_only = True

    def features(self, node: Node, inputs: Sequence[TensorInfo | None], index: int = 0,
                 types: Sequence[DType] = FEATURE_TYPES) -> TensorInfo:
        """Input ``index``: required, of one of ``types``, rank 1 or 2 when known."""
        x = inputs[index] if len(inputs) > index else None
        if x is None:
            raise self.fail(node, f"input {index} is required")
        if x.dtype not in types:
            raise self.fail(node, f"input {index} must be one of "
                                  f"{[str(t) for t in types]}, got {x.dtype}")
        if x.shape is not None and len(x.shape) not in (1, 2):
            raise self.fail(node, f"input {index} must be [N, C] or [C], got shape {x.shape}")
        return x

    def floats(self, node: Node, name: str, required: bool = False) -> np.ndarray | None:
        """A float attribute list, or its ``<name>_as_tensor`` form, as float64."""
        value = self.attr(node, name)
        if value is None:
            value = self.attr(node, f"{name}_as_tensor")
        if value is None:
            if required:
                raise self.fail(node, f"missing required attribute {name!r}")
            return None
        return np.asarray(value, dtype=np.float64).reshape(-1)

    def ints(self, node: Node, name: str, required: bool = False) -> np.ndarray | None:
        """An int attribute list as int64."""
        value = self.attr(node, name, required=required)
        return None if value is None else np.asarray(value, dtype=np.int64).reshape(-1)

    def choice(self, node: Node, name: str, default: str, allowed: Sequence[str]) -> str:
        """A string attribute that must be one of ``allowed``."""
        value = self.attr(node, name, default)
        if value not in allowed:
            raise self.fail(node, f"attribute {name!r} must be one of {list(allowed)}, got "
                                  f"{value!r}")
        return str(value)

    def post_transform(self, node: Node) -> str:
        return self.choice(node, "post_transform", "NONE", POST_TRANSFORMS)


def rows(info: TensorInfo) -> Any:
    """The batch dimension of a [N, C] or [C] feature input (1 for [C])."""
    if info.shape is None:
        return None
    return info.shape[0] if len(info.shape) == 2 else 1


def as_matrix(x: Any) -> np.ndarray:
    """Features as a float64 [N, C] matrix ([C] is one row)."""
    a = np.asarray(x, dtype=np.float64)
    return a.reshape(1, -1) if a.ndim == 1 else a


def _erf_inv(x: float) -> float:
    """onnxruntime's approximation of erf^-1 (used by PROBIT)."""
    sgn = -1.0 if x < 0 else 1.0
    x = (1.0 - x) * (1.0 + x)
    if x == 0:
        return 0.0
    log = math.log(x)
    v = 2.0 / (math.pi * 0.147) + 0.5 * log
    v2 = 1.0 / 0.147 * log
    return sgn * math.sqrt(-v + math.sqrt(v * v - v2))


def logistic(s: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-s)), without overflow."""
    e = np.exp(-np.abs(s))
    return np.where(s >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def probit(s: np.ndarray) -> np.ndarray:
    flat = [1.41421356 * _erf_inv(2.0 * v - 1.0) for v in np.asarray(s).reshape(-1)]
    return np.array(flat, np.float64).reshape(np.shape(s))


def softmax_zero(s: np.ndarray) -> np.ndarray:
    """Softmax over each row where exact zeros stay zero."""
    out = np.zeros_like(s)
    for i, row in enumerate(s):
        top = row.max()
        e = np.where(row != 0, np.exp(row - top), 0.0)
        total = e.sum()
        out[i] = e / total if total else 0.5
    return out


def apply_post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """The post-transform of [N, K] scores (float64)."""
    if name == "SOFTMAX":
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "LOGISTIC":
        return logistic(scores)
    if name == "SOFTMAX_ZERO":
        return softmax_zero(scores)
    if name == "PROBIT":
        return probit(scores)
    return scores


def class_labels(op: MLOp, node: Node, ints_name: str = "classlabels_int64s"
                 ) -> tuple[list, DType]:
    """``classlabels_int64s`` (LinearClassifier, SVMClassifier: ``classlabels_ints``) or
    ``classlabels_strings``, and the label output's dtype."""
    ints, strs = op.attr(node, ints_name), op.attr(node, "classlabels_strings")
    if (ints is None or not len(ints)) == (strs is None or not len(strs)):
        raise op.fail(node, f"exactly one of {ints_name} and classlabels_strings is required")
    if ints is not None and len(ints):
        return [int(v) for v in ints], DType.int64
    return [str(v) for v in strs], DType.string


def label_array(labels: list, picked: np.ndarray, dt: DType) -> np.ndarray:
    """The labels at indices ``picked`` as an int64 or string array."""
    if dt.is_string:
        out = np.empty(picked.shape, dtype=object)
        out.reshape(-1)[:] = [labels[i] for i in picked.reshape(-1)]
        return out
    return np.asarray(labels, dtype=np.int64)[picked]
