"""Feature preprocessing: Normalizer, Scaler, Binarizer, Imputer, ArrayFeatureExtractor and
FeatureVectorizer."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import OpCase, TensorInfo

from .common import FEATURE_TYPES, MLOp, as_matrix, rows

_FLOATS = (DType.float32, DType.float64)
_SAMPLE = np.array([[1.0, -2.0, 3.0], [0.0, 0.0, 0.0], [-4.0, 0.5, 2.0]], np.float32)


class Normalizer(MLOp):
    """Each row divided by its MAX, L1 or L2 norm (float32 output)."""

    op_type = "Normalizer"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        self.choice(node, "norm", "MAX", ("MAX", "L1", "L2"))
        return [TensorInfo(DType.float32, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        m = as_matrix(x)
        norm = self.choice(node, "norm", "MAX", ("MAX", "L1", "L2"))
        if norm == "MAX":
            div = m.max(axis=1, keepdims=True)
        elif norm == "L1":
            div = np.abs(m).sum(axis=1, keepdims=True)
        else:
            div = np.sqrt((m * m).sum(axis=1, keepdims=True))
        with np.errstate(all="ignore"):
            out = np.where(div != 0, m / np.where(div != 0, div, 1), m)
        return [out.reshape(x.shape).astype(np.float32)]

    def cases(self) -> list[OpCase]:
        return [OpCase(n.lower(), [_SAMPLE], {"norm": n}) for n in ("MAX", "L1", "L2")]


class Scaler(MLOp):
    """(x - offset) * scale per feature (one value: every feature), float32 output."""

    op_type = "Scaler"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        return [TensorInfo(DType.float32, self.features(node, inputs).shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        m = as_matrix(x)
        offset = self.floats(node, "offset")
        scale = self.floats(node, "scale")
        for name, v in (("offset", offset), ("scale", scale)):
            if v is not None and v.size not in (1, m.shape[1]):
                raise self.fail(node, f"{name} has {v.size} values for {m.shape[1]} features")
        y = (m - (0.0 if offset is None else offset)) * (1.0 if scale is None else scale)
        return [y.reshape(x.shape).astype(np.float32)]

    def cases(self) -> list[OpCase]:
        return [OpCase("per_feature", [_SAMPLE], {"offset": (1.0, 0.0, -1.0),
                                                 "scale": (0.5, 2.0, 1.0)}),
                OpCase("one_value", [_SAMPLE.astype(np.float64)], {"offset": (0.5,),
                                                                     "scale": (3.0,)})]


class Binarizer(MLOp):
    """1 where x > threshold, else 0, in the input's type."""

    op_type = "Binarizer"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None or x.dtype not in FEATURE_TYPES:
            raise self.fail(node, "input X must be a float, double, int32 or int64 tensor")
        return [TensorInfo(x.dtype, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        threshold = float(self.attr(node, "threshold", 0.0))
        return [(x > threshold).astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        return [OpCase("threshold", [_SAMPLE], {"threshold": 0.5}), OpCase("default", [_SAMPLE])]


class Imputer(MLOp):
    """Values equal to ``replaced_value_*`` (NaN: NaNs) become the feature's imputed value."""

    op_type = "Imputer"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        self._config(node, x.dtype)
        return [TensorInfo(x.dtype, x.shape)]

    def _config(self, node, dt: DType) -> tuple[np.ndarray, float]:
        floats, ints = self.floats(node, "imputed_value_floats"), self.attr(node,
                                                                            "imputed_value_int64s")
        if dt.is_float:
            if floats is None or not floats.size:
                raise self.fail(node, "a float input needs imputed_value_floats")
            return floats, float(self.attr(node, "replaced_value_float", 0.0))
        if ints is None or not len(ints):
            raise self.fail(node, "an integer input needs imputed_value_int64s")
        return np.asarray(ints, np.float64), float(self.attr(node, "replaced_value_int64", 0))

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        values, replaced = self._config(node, DType.float32 if x.dtype.kind == "f"
                                        else DType.int64)
        m = x.reshape(1, -1) if x.ndim == 1 else x
        if values.size not in (1, m.shape[1]):
            raise self.fail(node, f"{values.size} imputed values for {m.shape[1]} features")
        hit = np.isnan(m) if np.isnan(replaced) else m == replaced
        out = np.where(hit, np.broadcast_to(values, m.shape).astype(x.dtype), m)
        return [out.reshape(x.shape).astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, np.nan, 3.0], [np.nan, 0.0, -1.0]], np.float32)
        return [OpCase("nan", [x], {"imputed_value_floats": (9.0, 8.0, 7.0),
                                    "replaced_value_float": float("nan")}),
                OpCase("int_value", [np.array([[1, 0], [0, 5]], np.int64)],
                       {"imputed_value_int64s": (-1,), "replaced_value_int64": 0})]


class ArrayFeatureExtractor(MLOp):
    """The features at ``Y``'s indices along the last axis ([C] input: one row)."""

    op_type = "ArrayFeatureExtractor"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs X and Y")
        x, y = inputs
        if y.dtype is not DType.int64:
            raise self.fail(node, f"indices Y must be int64, got {y.dtype}")
        if x.shape is None:
            return [TensorInfo(x.dtype, None)]
        lead = (1,) if len(x.shape) == 1 else x.shape[:-1]
        return [TensorInfo(x.dtype, (*lead, None))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, y = np.asarray(inputs[0]), np.asarray(inputs[1]).reshape(-1)
        if y.size and (y.min() < 0 or y.max() >= x.shape[-1]):
            from spawnml.errors import InvalidInputError

            raise InvalidInputError(f"{node.describe()}: index {int(y.max())} is outside the "
                                    f"{x.shape[-1]} features")
        lead = (1,) if x.ndim == 1 else x.shape[:-1]
        return [x[..., y].reshape(*lead, y.size)]

    def cases(self) -> list[OpCase]:
        return [OpCase("matrix", [_SAMPLE, np.array([2, 0], np.int64)]),
                OpCase("vector", [_SAMPLE[0], np.array([1], np.int64)])]


class FeatureVectorizer(MLOp):
    """Inputs as [N, d_i] (cut or zero-padded to ``inputdimensions``), joined on axis 1."""

    op_type = "FeatureVectorizer"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        dims = [int(d) for d in self.attr(node, "inputdimensions", required=True)]
        if len(dims) != len(inputs) or any(i is None for i in inputs):
            raise self.fail(node, f"inputdimensions has {len(dims)} entries for "
                                  f"{len(inputs)} inputs")
        first = self.features(node, inputs)
        for i in range(len(inputs)):
            self.features(node, inputs, i)
        return [TensorInfo(DType.float32, (rows(first), sum(dims)))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        dims = [int(d) for d in self.attr(node, "inputdimensions", required=True)]
        parts = []
        for a, d in zip(inputs, dims):
            m = np.asarray(a, np.float64)
            m = m.reshape(-1, 1) if m.ndim == 1 else m
            fixed = np.zeros((m.shape[0], d))
            fixed[:, : min(d, m.shape[1])] = m[:, :d]
            parts.append(fixed)
        return [np.concatenate(parts, axis=1).astype(np.float32)]

    def cases(self) -> list[OpCase]:
        return [OpCase("pad_and_cut", [_SAMPLE, np.array([[1], [2], [3]], np.float32)],
                       {"inputdimensions": (2, 3)})]
