"""TreeEnsembleClassifier, TreeEnsembleRegressor (ai.onnx.ml 1-4) and TreeEnsemble (5)."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, TensorInfo

from .common import (
    MLOp,
    apply_post_transform,
    as_matrix,
    class_labels,
    label_array,
    logistic,
    rows,
)
from .forest import LEAF, MEMBER, Forest, aggregate, legacy_forest

_AGGREGATES = ("SUM", "AVERAGE", "MIN", "MAX")
_V5_AGGREGATES = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}
_V5_POST = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}


class _LegacyTrees(MLOp):
    """What the two legacy ops share: the nodes_* attributes as a Forest."""

    leaf_prefix = "class"  # class_* (classifier) or target_* (regressor)

    def forest(self, node: Node) -> Forest:
        names = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                 "nodes_truenodeids", "nodes_falsenodeids")
        attrs = {k: self.attr(node, k, required=True) for k in names}
        attrs["nodes_values"] = self.floats(node, "nodes_values")
        if attrs["nodes_values"] is None:
            attrs["nodes_values"] = np.zeros(len(attrs["nodes_nodeids"]))
        attrs["nodes_missing_value_tracks_true"] = self.attr(node,
                                                             "nodes_missing_value_tracks_true")
        p = self.leaf_prefix
        ids = self.attr(node, f"{p}_nodeids", ())
        trees = self.attr(node, f"{p}_treeids", ())
        targets = self.attr(node, f"{p}_ids", ())
        weights = self.floats(node, f"{p}_weights")
        weights = () if weights is None else weights
        if not len(ids) == len(trees) == len(targets) == len(weights):
            raise self.fail(node, f"{p}_nodeids, {p}_treeids, {p}_ids and {p}_weights must "
                                  "have the same length")
        return legacy_forest(attrs, ids, trees, targets, weights, node.describe())

    def run_forest(self, node: Node, x: np.ndarray, n_targets: int, how: str
                   ) -> tuple[np.ndarray, np.ndarray]:
        forest = self.forest(node)
        forest.check_features(x.shape[1], node.describe())
        return aggregate(forest, x, n_targets, how, node.describe())


class TreeEnsembleClassifier(_LegacyTrees):
    """Per class: base value + the sum of the reached leaves' class weights; then the
    post-transform and the label of the best class. A binary model (two labels, one class
    id) scores the second class ``s`` and writes ``[1 - s, s]`` when every weight is
    positive (label: s > 0.5), else ``[-s, s]`` (LOGISTIC: of both; label: s > 0), as
    onnxruntime does."""

    op_type = "TreeEnsembleClassifier"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        labels, dt = class_labels(self, node)
        self.post_transform(node)
        self.forest(node)
        n = rows(x)
        return [TensorInfo(dt, (n,)), TensorInfo(DType.float32, (n, len(labels)))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_matrix(inputs[0])
        labels, dt = class_labels(self, node)
        post = self.post_transform(node)
        ids = {int(i) for i in self.attr(node, "class_ids", ())}
        scores, _ = self.run_forest(node, x, max(len(labels), max(ids, default=0) + 1), "SUM")
        base = self.floats(node, "base_values")
        if base is not None and base.size:
            scores[:, : base.size] += base[: scores.shape[1]]
        if len(labels) == 2 and len(ids) == 1:
            s = scores[:, next(iter(ids))]
            positive = (self.floats(node, "class_weights") >= 0).all()
            if positive:
                z = np.stack([1.0 - s, s], axis=1)
                picked = (s > 0.5).astype(np.int64)
            else:
                z = np.stack([-s, s], axis=1)
                z = logistic(z) if post == "LOGISTIC" else z
                picked = (s > 0).astype(np.int64)
        else:
            z = apply_post_transform(scores[:, : len(labels)], post)
            picked = np.argmax(z, axis=1)
        return [label_array(labels, picked, dt), z.astype(np.float32)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 5.0], [3.0, -1.0], [np.nan, 2.0], [2.5, 0.5]], np.float32)
        tree = {"nodes_treeids": (0, 0, 0, 1, 1, 1), "nodes_nodeids": (0, 1, 2, 0, 1, 2),
                "nodes_featureids": (0, 0, 0, 1, 0, 0), "nodes_values": (2.0, 0, 0, 1.0, 0, 0),
                "nodes_modes": ("BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF"),
                "nodes_truenodeids": (1, 0, 0, 1, 0, 0), "nodes_falsenodeids": (2, 0, 0, 2, 0, 0),
                "nodes_missing_value_tracks_true": (1, 0, 0, 0, 0, 0)}
        multi = {**tree, "class_treeids": (0, 0, 0, 1, 1), "class_nodeids": (1, 2, 2, 1, 2),
                 "class_ids": (0, 1, 2, 2, 0), "class_weights": (0.5, 0.3, 0.2, 0.4, 0.6),
                 "classlabels_int64s": (7, 8, 9)}
        binary = {**tree, "class_treeids": (0, 0, 1, 1), "class_nodeids": (1, 2, 1, 2),
                  "class_ids": (0, 0, 0, 0), "class_weights": (-0.5, 0.3, 0.4, -0.2),
                  "classlabels_strings": ("no", "yes"), "post_transform": "LOGISTIC",
                  "base_values": (0.1,)}
        return [OpCase("multiclass", [x], multi, n_outputs=2),
                OpCase("multiclass_softmax", [x], {**multi, "post_transform": "SOFTMAX"},
                       n_outputs=2),
                OpCase("binary_logistic_strings", [x], binary, n_outputs=2)]


class TreeEnsembleRegressor(_LegacyTrees):
    """Per target: the leaves' weights aggregated over trees (SUM, AVERAGE, MIN, MAX),
    plus base values, then the post-transform; float32 [N, n_targets]. A target that no
    reached leaf adds to stays 0, without its base value (as onnxruntime)."""

    op_type = "TreeEnsembleRegressor"
    leaf_prefix = "target"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs)
        self.post_transform(node)
        self.choice(node, "aggregate_function", "SUM", _AGGREGATES)
        self.forest(node)
        return [TensorInfo(DType.float32, (rows(x), int(self.attr(node, "n_targets", 1))))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_matrix(inputs[0])
        how = self.choice(node, "aggregate_function", "SUM", _AGGREGATES)
        y, reached = self.run_forest(node, x, int(self.attr(node, "n_targets", 1)), how)
        base = self.floats(node, "base_values")
        if base is not None and base.size:
            y = np.where(reached, y + base, y)
        return [apply_post_transform(y, self.post_transform(node)).astype(np.float32)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 5.0], [3.0, -1.0], [2.5, 0.5]], np.float32)
        attrs = {"nodes_treeids": (0, 0, 0, 1, 1, 1), "nodes_nodeids": (0, 1, 2, 0, 1, 2),
                 "nodes_featureids": (0, 0, 0, 1, 0, 0), "nodes_values": (2.0, 0, 0, 1.0, 0, 0),
                 "nodes_modes": ("BRANCH_LT", "LEAF", "LEAF", "BRANCH_GTE", "LEAF", "LEAF"),
                 "nodes_truenodeids": (1, 0, 0, 1, 0, 0),
                 "nodes_falsenodeids": (2, 0, 0, 2, 0, 0),
                 "target_treeids": (0, 0, 1, 1, 1), "target_nodeids": (1, 2, 1, 2, 2),
                 "target_ids": (0, 0, 0, 0, 1), "target_weights": (1.0, 2.0, 3.0, 4.0, 5.0),
                 "n_targets": 2, "base_values": (0.5, -0.5)}
        return [OpCase(f"aggregate_{a.lower()}", [x], {**attrs, "aggregate_function": a})
                for a in _AGGREGATES]


class TreeEnsemble(MLOp):
    """TreeEnsemble (ai.onnx.ml 5): splits and leaves in separate arrays, integer modes
    (BRANCH_MEMBER: set membership), output in the input's float type. ``post_transform``
    follows the specification's codes (1 SOFTMAX, 2 LOGISTIC...); onnx.reference ignores
    the attribute and onnxruntime 1.32 reads the codes in another order."""

    op_type = "TreeEnsemble"
    since_version = 5

    def forest(self, node: Node) -> tuple[Forest, int]:
        get = self.attr
        feature = self.ints(node, "nodes_featureids", True)
        n = feature.size
        modes = np.asarray(get(node, "nodes_modes", required=True), np.int64).reshape(-1)
        splits = np.asarray(get(node, "nodes_splits", required=True), np.float64).reshape(-1)
        t_ids, f_ids = self.ints(node, "nodes_truenodeids", True), self.ints(
            node, "nodes_falsenodeids", True)
        t_leaf, f_leaf = self.ints(node, "nodes_trueleafs", True), self.ints(
            node, "nodes_falseleafs", True)
        targets, weights = self.ints(node, "leaf_targetids", True), np.asarray(
            get(node, "leaf_weights", required=True), np.float64).reshape(-1)
        if not all(a.size == n for a in (modes, splits, t_ids, f_ids, t_leaf, f_leaf)):
            raise self.fail(node, "the nodes_* attributes must have the same length")
        if targets.size != weights.size:
            raise self.fail(node, "leaf_targetids and leaf_weights must have the same length")
        if modes.size and (modes.min() < 0 or modes.max() > MEMBER):
            raise self.fail(node, f"nodes_modes must be in 0..6, got {modes.tolist()}")
        true_next = np.where(t_leaf != 0, n + t_ids, t_ids)
        false_next = np.where(f_leaf != 0, n + f_ids, f_ids)
        for nxt in (true_next, false_next):
            if nxt.size and (nxt.min() < 0 or nxt.max() >= n + targets.size):
                raise self.fail(node, "a node points outside the node and leaf arrays")
        roots = []
        for r in self.ints(node, "tree_roots", True).tolist():
            if not 0 <= r < n:
                raise self.fail(node, f"tree root {r} is outside the {n} nodes")
            leaf = t_leaf[r] and f_leaf[r] and t_ids[r] == f_ids[r]
            roots.append(n + int(t_ids[r]) if leaf else r)
        members: dict[int, np.ndarray] = {}
        values = get(node, "membership_values")
        groups = (np.split(np.asarray(values, np.float64), np.flatnonzero(
            np.isnan(np.asarray(values, np.float64))) + 1) if values is not None else [])
        for k, node_index in enumerate(np.flatnonzero(modes == MEMBER).tolist()):
            if k >= len(groups):
                raise self.fail(node, "membership_values has fewer sets than "
                                      "BRANCH_MEMBER nodes")
            members[node_index] = groups[k][~np.isnan(groups[k])]
        missing = self.ints(node, "nodes_missing_value_tracks_true")
        forest = Forest(
            roots=np.array(roots, np.int64),
            mode=np.concatenate([modes, np.full(targets.size, LEAF)]),
            feature=np.concatenate([feature, np.zeros(targets.size, np.int64)]),
            threshold=np.concatenate([splits, np.zeros(targets.size)]),
            true_next=np.concatenate([true_next, np.zeros(targets.size, np.int64)]),
            false_next=np.concatenate([false_next, np.zeros(targets.size, np.int64)]),
            missing_true=np.concatenate([np.zeros(n, bool) if missing is None else missing != 0,
                                         np.zeros(targets.size, bool)]),
            weights=[[] for _ in range(n)] + [[(int(t), float(w))]
                                              for t, w in zip(targets, weights)],
            members=members)
        return forest, int(self.attr(node, "n_targets", required=True))

    def _enum(self, node: Node, name: str, table: dict[int, str], default: int) -> str:
        value = int(self.attr(node, name, default))
        if value not in table:
            raise self.fail(node, f"attribute {name!r} must be one of {sorted(table)}, got "
                                  f"{value}")
        return table[value]

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = self.features(node, inputs, types=(DType.float32, DType.float64, DType.float16))
        self._enum(node, "aggregate_function", _V5_AGGREGATES, 1)
        self._enum(node, "post_transform", _V5_POST, 0)
        _, n_targets = self.forest(node)
        return [TensorInfo(x.dtype, (rows(x), n_targets))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        forest, n_targets = self.forest(node)
        m = as_matrix(x)
        forest.check_features(m.shape[1], node.describe())
        how = self._enum(node, "aggregate_function", _V5_AGGREGATES, 1)
        y, _ = aggregate(forest, m, n_targets, how, node.describe())
        y = apply_post_transform(y, self._enum(node, "post_transform", _V5_POST, 0))
        return [y.astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        x = np.array([[1.0, 5.0], [3.0, -1.0], [2.0, np.nan]], np.float32)
        attrs = {"nodes_featureids": (0, 1), "nodes_splits": np.array([2.0, 0.0], np.float32),
                 "nodes_modes": np.array([0, 6], np.uint8), "nodes_truenodeids": (0, 1),
                 "nodes_trueleafs": (1, 1), "nodes_falsenodeids": (1, 2),
                 "nodes_falseleafs": (0, 1), "nodes_missing_value_tracks_true": (0, 1),
                 "membership_values": np.array([5.0, -1.0, np.nan], np.float32),
                 "tree_roots": (0,), "leaf_targetids": (0, 1, 0),
                 "leaf_weights": np.array([1.0, 2.0, 3.0], np.float32), "n_targets": 2}
        return [OpCase("membership", [x], attrs),
                OpCase("average", [x], {**attrs, "aggregate_function": 0})]
