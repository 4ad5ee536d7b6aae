"""Decision forests in one flat form, walked for all rows at once with numpy.

Both encodings build a :class:`Forest`: the legacy one of TreeEnsembleClassifier /
TreeEnsembleRegressor (``nodes_*`` lists keyed by tree and node ids, ``LEAF`` nodes with
class/target weights) and TreeEnsemble's (opset 5: node and leaf arrays, ``tree_roots``).
A split goes to its true branch when the comparison holds, or when the feature is NaN and
the node's ``missing_value_tracks_true`` is set (onnxruntime's rule for both encodings)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from spawnml.errors import InvalidInputError, InvalidModelError

LEAF = -1
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
LEGACY_MODES = {"LEAF": LEAF, "BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE,
                "BRANCH_GT": GT, "BRANCH_EQ": EQ, "BRANCH_NEQ": NEQ}
_COMPARE: dict[int, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater, EQ: np.equal,
    NEQ: np.not_equal,
}


@dataclass
class Forest:
    """Nodes (splits and leaves) of every tree; ``weights[i]``: the (target, weight) pairs
    a leaf ``i`` adds."""

    roots: np.ndarray
    mode: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    true_next: np.ndarray
    false_next: np.ndarray
    missing_true: np.ndarray
    weights: list[list[tuple[int, float]]]
    members: dict[int, np.ndarray] = field(default_factory=dict)

    def check_features(self, n_features: int, where: str) -> None:
        """Every split reads a feature below ``n_features``."""
        used = self.feature[self.mode != LEAF]
        if used.size and (used.min() < 0 or used.max() >= n_features):
            raise InvalidInputError(f"{where}: a split reads feature {int(used.max())}, but "
                                    f"the input has {n_features} features")

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """[N, trees]: the leaf each row reaches in each tree (x is [N, C] float64)."""
        idx = np.broadcast_to(self.roots, (x.shape[0], self.roots.size)).copy()
        rows = np.arange(x.shape[0])[:, None]
        for _ in range(self.mode.size + 1):
            mode = self.mode[idx]
            inner = mode != LEAF
            if not inner.any():
                return idx
            v = x[rows, np.where(inner, self.feature[idx], 0)]
            th = self.threshold[idx]
            go = np.zeros(idx.shape, bool)
            for code, cmp in _COMPARE.items():
                sel = mode == code
                go[sel] = cmp(v[sel], th[sel])
            for node, values in self.members.items():
                sel = idx == node
                go[sel] = np.isin(v[sel], values)
            go |= np.isnan(v) & self.missing_true[idx]
            idx = np.where(inner, np.where(go, self.true_next[idx], self.false_next[idx]), idx)
        raise InvalidModelError("the trees have a cycle (a walk never reaches a leaf)")

    def leaf_matrix(self, n_targets: int, where: str) -> tuple[np.ndarray, np.ndarray]:
        """Per node: [nodes, targets] summed leaf weights and whether it adds to a target."""
        total = np.zeros((self.mode.size, n_targets), np.float64)
        has = np.zeros((self.mode.size, n_targets), bool)
        for i, pairs in enumerate(self.weights):
            for target, w in pairs:
                if not 0 <= target < n_targets:
                    raise InvalidModelError(f"{where}: target/class id {target} is outside "
                                            f"[0, {n_targets})")
                total[i, target] += w
                has[i, target] = True
        return total, has


def aggregate(forest: Forest, x: np.ndarray, n_targets: int, how: str, where: str
              ) -> tuple[np.ndarray, np.ndarray]:
    """[N, targets]: the trees' leaf weights combined by SUM, AVERAGE, MIN or MAX, and
    whether any reached leaf adds to the target (one that none reaches stays 0)."""
    total, has = forest.leaf_matrix(n_targets, where)
    leaves = forest.leaves(x)
    w, h = total[leaves], has[leaves]  # [N, trees, targets]
    reached = h.any(axis=1)
    if how in ("SUM", "AVERAGE"):
        out = w.sum(axis=1)
        return (out / forest.roots.size if how == "AVERAGE" else out), reached
    pick = np.min if how == "MIN" else np.max
    fill = np.inf if how == "MIN" else -np.inf
    out = pick(np.where(h, w, fill), axis=1) if forest.roots.size else np.zeros(reached.shape)
    return np.where(reached, out, 0.0), reached


def legacy_forest(attrs: dict, leaf_ids: Sequence[int], leaf_trees: Sequence[int],
                  leaf_targets: Sequence[int], leaf_weights: Sequence[float], where: str
                  ) -> Forest:
    """A Forest from TreeEnsembleClassifier/Regressor attributes (``attrs``: nodes_* lists
    already read; leaf_*: the class_* or target_* lists)."""
    trees, ids = list(attrs["nodes_treeids"]), list(attrs["nodes_nodeids"])
    n = len(ids)
    for name in ("nodes_featureids", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids"):
        if len(attrs[name]) != n:
            raise InvalidModelError(f"{where}: {name} has {len(attrs[name])} entries, "
                                    f"nodes_nodeids {n}")
    index = {(t, i): k for k, (t, i) in enumerate(zip(trees, ids))}
    try:
        mode = np.array([LEGACY_MODES[str(m)] for m in attrs["nodes_modes"]], np.int64)
    except KeyError as exc:
        raise InvalidModelError(f"{where}: unknown node mode {exc.args[0]!r}") from None

    def resolve(name: str) -> np.ndarray:
        out = np.zeros(n, np.int64)
        for k, (t, target) in enumerate(zip(trees, attrs[name])):
            if mode[k] == LEAF:
                continue
            if (t, int(target)) not in index:
                raise InvalidModelError(f"{where}: node ({t}, {ids[k]}) points to node "
                                        f"{target}, which tree {t} does not have")
            out[k] = index[t, int(target)]
        return out

    missing = attrs.get("nodes_missing_value_tracks_true")
    weights: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for t, i, target, w in zip(leaf_trees, leaf_ids, leaf_targets, leaf_weights):
        if (t, i) not in index:
            raise InvalidModelError(f"{where}: a weight names node ({t}, {i}), which does "
                                    "not exist")
        weights[index[t, i]].append((int(target), float(w)))
    roots = np.array([min(k for k, tt in enumerate(trees) if tt == t) for t in
                      sorted(set(trees))], np.int64)
    return Forest(
        roots=roots, mode=mode, feature=np.asarray(attrs["nodes_featureids"], np.int64),
        threshold=np.asarray(attrs["nodes_values"], np.float64),
        true_next=resolve("nodes_truenodeids"), false_next=resolve("nodes_falsenodeids"),
        missing_true=(np.zeros(n, bool) if missing is None or not len(missing)
                      else np.asarray(missing, np.int64) != 0),
        weights=weights)
