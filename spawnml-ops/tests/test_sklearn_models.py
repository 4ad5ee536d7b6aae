"""Acceptance: scikit-learn models converted by skl2onnx (ai.onnx.ml operators) give
onnxruntime's labels exactly and its probabilities to 1e-5 on cpu."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from skl2onnx import to_onnx
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from spawnml import InferenceSession


def _data(n_classes: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if n_classes is None:
        x, y = make_regression(160, 6, random_state=seed)
    else:
        x, y = make_classification(160, 6, n_informative=4, n_classes=n_classes,
                                   random_state=seed)
    return x.astype(np.float32), y


MODELS: dict[str, tuple[Any, int | None]] = {
    "random_forest_3_classes": (RandomForestClassifier(8, max_depth=5, random_state=0), 3),
    "random_forest_binary": (RandomForestClassifier(8, max_depth=5, random_state=0), 2),
    "gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=8, random_state=0), 2),
    "gradient_boosting_3_classes": (GradientBoostingClassifier(n_estimators=8,
                                                               random_state=0), 3),
    "logistic_regression_3_classes": (LogisticRegression(max_iter=500), 3),
    "logistic_regression_binary": (LogisticRegression(max_iter=500), 2),
    "scaler_logistic_pipeline": (Pipeline([("scale", StandardScaler()),
                                           ("clf", LogisticRegression(max_iter=500))]), 3),
    "random_forest_regressor": (RandomForestRegressor(8, max_depth=5, random_state=0), None),
    "gradient_boosting_regressor": (GradientBoostingRegressor(n_estimators=8,
                                                              random_state=0), None),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_onnxruntime(name: str) -> None:
    model, n_classes = MODELS[name]
    x, y = _data(n_classes, seed=len(name))
    model.fit(x, y)
    last = model.steps[-1][1] if isinstance(model, Pipeline) else model
    options = {id(last): {"zipmap": False}} if n_classes is not None else None
    onx = to_onnx(model, x[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})
    expected = ort.InferenceSession(onx.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"X": x})
    got = InferenceSession(onx.SerializeToString(), backends=["cpu"]).run(None, {"X": x})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        if e.dtype.kind == "f":
            # probabilities (and regression outputs, relative to their scale) to 1e-5
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, e)  # labels


@pytest.mark.parametrize("n_classes", [2, 3])
def test_default_conversion_with_zipmap_matches_onnxruntime(n_classes: int) -> None:
    """skl2onnx's default classifier output: probabilities as a list of {label: p} maps."""
    x, y = _data(n_classes, seed=n_classes)
    model = Pipeline([("scale", StandardScaler()),
                      ("clf", RandomForestClassifier(6, max_depth=4, random_state=0))])
    model.fit(x, y)
    onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    assert any(n.op_type == "ZipMap" for n in onx.graph.node)
    expected = ort.InferenceSession(onx.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"X": x})
    sess = InferenceSession(onx.SerializeToString(), backends=["cpu"])
    labels, maps = sess.run(None, {"X": x})
    np.testing.assert_array_equal(labels, expected[0])
    assert isinstance(maps, list) and len(maps) == len(expected[1]) == len(x)
    for got_row, want_row in zip(maps, expected[1]):
        assert got_row.keys() == want_row.keys()
        np.testing.assert_allclose([got_row[k] for k in want_row], list(want_row.values()),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    assert sess.get_outputs()[1].type.startswith("seq(")
