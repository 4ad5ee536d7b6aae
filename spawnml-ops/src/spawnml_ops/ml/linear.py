"""LinearClassifier and LinearRegressor: scores = X W^T + intercepts."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, TensorInfo

from .common import MLOp, apply_post_transform, as_matrix, class_labels, label_array, rows


def linear_scores(op: MLOp, node: Node, x: np.ndarray, n_targets: int | None) -> np.ndarray:
    """[N, K] = x W^T + b, W from ``coefficients`` (K rows of C features)."""
    coef = op.floats(node, "coefficients", required=True)
    k = n_targets if n_targets is not None else max(1, coef.size // max(x.shape[1], 1))
    if coef.size != k * x.shape[1]:
        raise op.fail(node, f"coefficients has {coef.size} values, expected {k} x "
                            f"{x.shape[1]} features")
    scores = x @ coef.reshape(k, x.shape[1]).T
    intercepts = op.floats(node, "intercepts")
    if intercepts is not None and intercepts.size:
        if intercepts.size not in (1, k):
            raise op.fail(node, f"intercepts has {intercepts.size} values, expected {k}")
        scores = scores + intercepts
    return scores


class LinearClassifier(MLOp):
    """Scores per class, post-transformed; the label of the best. One coefficient row and
    two labels: the scores are ``[-s, s]`` (onnxruntime's binary form)."""

    op_type = "LinearClassifier"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        labels, dt = class_labels(self, node, "classlabels_ints")
        self.post_transform(node)
        self.floats(node, "coefficients", required=True)
        n = rows(x)
        coef = self.floats(node, "coefficients", required=True)
        width = x.shape[-1] if x.shape is not None else None
        k = coef.size // width if isinstance(width, int) and width else None
        cols = 2 if k == 1 and len(labels) == 2 else k
        return [TensorInfo(dt, (n,)), TensorInfo(DType.float32, (n, cols))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_matrix(inputs[0])
        labels, dt = class_labels(self, node, "classlabels_ints")
        post = self.post_transform(node)
        scores = linear_scores(self, node, x, None)
        if scores.shape[1] == 1 and len(labels) == 2:
            scores = np.concatenate([-scores, scores], axis=1)
        z = apply_post_transform(scores, post)
        if z.shape[1] == 1:  # one class: positive scores mean the label
            picked = np.zeros(len(z), np.int64)
            out = label_array(labels, picked, dt)
            threshold = 0.0 if post == "NONE" else 0.5
            if not dt.is_string:
                out = np.where(z[:, 0] >= threshold, out, 0)
        else:
            out = label_array(labels, np.argmax(z, axis=1), dt)
        return [out, z.astype(np.float32)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 2.0]], np.float32)
        attrs = {"coefficients": (0.1, -0.2, 0.3, 1.0, 0.0, -0.5, -0.3, 0.2, 0.1),
                 "intercepts": (0.0, 0.5, -0.5), "classlabels_ints": (1, 2, 3)}
        return [OpCase("multiclass", [x], attrs, n_outputs=2),
                OpCase("softmax", [x], {**attrs, "post_transform": "SOFTMAX"}, n_outputs=2),
                OpCase("binary_logistic", [x], {
                    "coefficients": (0.1, -0.2, 0.3), "intercepts": (0.2,),
                    "classlabels_strings": ("a", "b"), "post_transform": "LOGISTIC"},
                    n_outputs=2)]


class LinearRegressor(MLOp):
    """``targets`` outputs per row: X W^T + intercepts, post-transformed (float32)."""

    op_type = "LinearRegressor"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        self.post_transform(node)
        return [TensorInfo(DType.float32, (rows(x), int(self.attr(node, "targets", 1))))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_matrix(inputs[0])
        y = linear_scores(self, node, x, int(self.attr(node, "targets", 1)))
        return [apply_post_transform(y, self.post_transform(node)).astype(np.float32)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 2.0], [0.5, -3.0], [0.0, 0.0]], np.float32)
        return [OpCase("one_target", [x], {"coefficients": (0.3, -0.7), "intercepts": (1.5,)}),
                OpCase("two_targets", [x], {"coefficients": (0.3, -0.7, 1.0, 2.0),
                                            "intercepts": (1.5, -1.0), "targets": 2})]
