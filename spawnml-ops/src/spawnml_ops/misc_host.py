"""Ops whose output shape depends on input values, computed on the host (``host_only``):
NonMaxSuppression, Unique and Compress."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import OpCase, OpDef, TensorInfo

from .common import normalize_axis

# ---------------------------------------------------------------------- NonMaxSuppression


def _corners(box: np.ndarray, center: bool) -> tuple[float, float, float, float]:
    """(x_min, x_max, y_min, y_max) of a box in either layout."""
    if center:  # [x_center, y_center, width, height]
        return (box[0] - box[2] / 2, box[0] + box[2] / 2, box[1] - box[3] / 2,
                box[1] + box[3] / 2)
    # [y1, x1, y2, x2], corners in any order
    return (min(box[1], box[3]), max(box[1], box[3]), min(box[0], box[2]),
            max(box[0], box[2]))


def _overlaps(a: np.ndarray, b: np.ndarray, center: bool, threshold: float) -> bool:
    """Whether IoU(a, b) > threshold (degenerate boxes never suppress)."""
    ax0, ax1, ay0, ay1 = _corners(a, center)
    bx0, bx1, by0, by1 = _corners(b, center)
    iw, ih = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if iw <= 0 or ih <= 0:
        return False
    inter = iw * ih
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def _scalar(inputs, i: int, default: float) -> float:
    a = inputs[i] if len(inputs) > i else None
    return default if a is None or np.asarray(a).size == 0 else float(np.asarray(a).reshape(-1)[0])


class NonMaxSuppression(OpDef):
    op_type = "NonMaxSuppression"
    since_version = 10
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        boxes, scores = ([*list(inputs), None, None])[:2]
        if boxes is None or scores is None:
            raise self.fail(node, "inputs boxes and scores are required")
        if boxes.shape is not None and (len(boxes.shape) != 3 or boxes.shape[2] not in (4, None)):
            raise self.fail(node, f"boxes must be [batches, boxes, 4], got {boxes.shape}")
        if scores.shape is not None and len(scores.shape) != 3:
            raise self.fail(node, f"scores must be [batches, classes, boxes], got {scores.shape}")
        return [TensorInfo(DType.int64, (None, 3))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        boxes, scores = np.asarray(inputs[0], np.float64), np.asarray(inputs[1], np.float64)
        limit = max(int(_scalar(inputs, 2, 0)), 0)
        iou = _scalar(inputs, 3, 0.0)
        has_score = len(inputs) > 4 and inputs[4] is not None and np.asarray(inputs[4]).size
        score_min = _scalar(inputs, 4, 0.0)
        center = int(self.attr(node, "center_point_box", 0)) == 1
        picked = []
        for b in range(scores.shape[0]):
            for c in range(scores.shape[1]):
                s = scores[b, c]
                cand = [i for i in range(s.size) if not has_score or s[i] > score_min]
                cand.sort(key=lambda i: (-s[i], i))  # best first, ties: lower index
                kept: list[int] = []
                for i in cand:
                    if len(kept) >= limit:
                        break
                    if not any(_overlaps(boxes[b, i], boxes[b, k], center, iou) for k in kept):
                        kept.append(i)
                picked += [(b, c, i) for i in kept]
        return [np.array(picked, np.int64).reshape(-1, 3)]

    def cases(self) -> list[OpCase]:
        boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9],
                           [0, 10, 1, 11], [1, 10.1, 0, 11.1], [0, 100, 1, 101]]], np.float32)
        scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3],
                            [0.1, 0.2, 0.3, 0.3, 0.9, 0.8]]], np.float32)
        lim, iou, thr = np.array([3], np.int64), np.array([0.5], np.float32), \
            np.array([0.25], np.float32)
        return [
            OpCase("two_classes", [boxes, scores, lim, iou, thr]),
            OpCase("no_score_threshold", [boxes, scores, np.array([6], np.int64), iou]),
            OpCase("center_boxes", [boxes[:, :, [1, 0, 3, 2]] * [1, 1, 0.5, 2], scores, lim,
                                    iou], {"center_point_box": 1}),
            OpCase("limit_zero", [boxes, scores]),
        ]


# ---------------------------------------------------------------------------------- Unique


class Unique(OpDef):
    op_type = "Unique"
    since_version = 11
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None:
            raise self.fail(node, "input X is required")
        axis = self.attr(node, "axis")
        rank = None if x.shape is None else len(x.shape)
        if axis is not None and rank is not None:
            axis = normalize_axis(node, int(axis), rank)
        if axis is None:
            y = (None,)
        elif x.shape is None:
            y = None
        else:
            y = tuple(None if i == axis else d for i, d in enumerate(x.shape))
        idx = TensorInfo(DType.int64, (None,))
        return [TensorInfo(x.dtype, y), idx, idx, idx][: max(1, len(node.outputs))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = self.attr(node, "axis")
        if axis is not None:
            axis = normalize_axis(node, int(axis), x.ndim)
        y, idx, inv, cnt = np.unique(x if axis is not None else x.reshape(-1), True, True,
                                     True, axis=axis)
        inv = inv.reshape(-1)
        if not int(self.attr(node, "sorted", 1)):  # order of first occurrence
            order = np.argsort(idx, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y, idx, cnt, inv = np.take(y, order, axis=axis or 0), idx[order], cnt[order], \
                rank[inv]
        outs = [y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)]
        return outs[: max(1, len(node.outputs))]

    def cases(self) -> list[OpCase]:
        x = np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32)
        m = np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int64)
        return [
            OpCase("sorted", [x], n_outputs=4),
            OpCase("first_occurrence", [x], {"sorted": 0}, n_outputs=4),
            OpCase("axis0", [m], {"axis": 0}, n_outputs=4),
            OpCase("neg_axis_unsorted", [m.T.copy()], {"axis": -1, "sorted": 0}, n_outputs=4),
            OpCase("y_only", [m]),
        ]


# -------------------------------------------------------------------------------- Compress


class Compress(OpDef):
    op_type = "Compress"
    since_version = 9
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x, cond = ([*list(inputs), None, None])[:2]
        if x is None or cond is None:
            raise self.fail(node, "inputs input and condition are required")
        if cond.dtype != DType.bool:
            raise self.fail(node, f"condition must be bool, got {cond.dtype}")
        axis = self.attr(node, "axis")
        if axis is None or x.shape is None:
            return [TensorInfo(x.dtype, (None,) if axis is None else None)]
        axis = normalize_axis(node, int(axis), len(x.shape))
        return [TensorInfo(x.dtype, tuple(None if i == axis else d
                                          for i, d in enumerate(x.shape)))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, cond = np.asarray(inputs[0]), np.asarray(inputs[1]).reshape(-1)
        axis = self.attr(node, "axis")
        if axis is not None:
            axis = normalize_axis(node, int(axis), x.ndim)
        n = x.size if axis is None else x.shape[axis]
        if cond.size > n:
            raise self.fail(node, f"condition has {cond.size} entries, more than the {n} "
                                  "selectable slices")
        return [np.compress(cond, x, axis=axis)]

    def cases(self) -> list[OpCase]:
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        return [
            OpCase("axis0", [x, np.array([False, True, True])], {"axis": 0}),
            OpCase("axis_neg_short", [x, np.array([True, False, True])], {"axis": -1}),
            OpCase("flat", [x, np.array([0, 1, 0, 0, 1], bool)]),
            OpCase("none_selected", [x, np.zeros(3, bool)], {"axis": 0}),
        ]


OPS: list[type[OpDef]] = [NonMaxSuppression, Unique, Compress]
