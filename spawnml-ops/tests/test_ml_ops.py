"""ai.onnx.ml ops: every declared case against onnxruntime (rtol 1e-5) and, where
onnx.reference implements the op the same way, against onnx.reference; bad attributes and
inputs raise spawnml errors naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases
from ort_cases import assert_matches_onnxruntime

from spawnml.errors import InvalidInputError, InvalidModelError
from spawnml.op import Node, TensorInfo
from spawnml_ops import ml
from spawnml_ops.ml import LabelEncoder, LinearClassifier, TreeEnsembleClassifier

CASES = family_cases(ml.OPS)
# Where onnxruntime 1.32 cannot run a case (it has no LabelEncoder 4 kernel).
ORT_GAPS = {("LabelEncoder", "float_tensor_keys")}
# Where onnx.reference differs from onnxruntime, whose behaviour the references follow.
REFERENCE_GAPS = {
    ("Normalizer", "max"): "divides by max |x|; onnxruntime by the row's max",
    ("TreeEnsembleRegressor", "aggregate_min"): "an unreached target is float max, not 0",
    ("TreeEnsembleRegressor", "aggregate_max"): "an unreached target is float min, not 0",
    ("TreeEnsembleRegressor", "aggregate_sum"): "adds base values to unreached targets",
    ("TreeEnsembleRegressor", "aggregate_average"): "adds base values to unreached targets",
    ("TreeEnsembleClassifier", "binary_logistic_strings"): "binary scores differ",
    ("LinearClassifier", "binary_logistic"): "string labels of one class",
    ("FeatureVectorizer", "pad_and_cut"): "returns float64",
    ("Scaler", "one_value"): "keeps float64 (the specification and onnxruntime: float32)",
    ("LabelEncoder", "int_to_string"): "returns a numpy <U array, not str objects",
    ("LabelEncoder", "float_tensor_keys"): "a NaN key matches no NaN (the specification: it "
                                           "does)",
}


def _opset(op) -> int:
    return 5 if op.op_type == "TreeEnsemble" else 3


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnxruntime(op, case) -> None:
    if (op.op_type, case.name) in ORT_GAPS:
        pytest.skip("onnxruntime has no kernel for this opset")
    assert_matches_onnxruntime(op, case, case.opset or _opset(op))


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx_reference(op, case) -> None:
    check_reference(op, case, REFERENCE_GAPS)


def _node(op_type: str, **attrs) -> Node:
    return Node(op_type, ["x"], ["y", "z"], attrs, name="n", domain="ai.onnx.ml", opset=3)


def test_unknown_post_transform_is_refused() -> None:
    node = _node("LinearClassifier", coefficients=(1.0, 2.0), classlabels_ints=(0, 1),
                 post_transform="CUBIC")
    with pytest.raises(InvalidModelError, match=r"LinearClassifier node 'n'.*post_transform"):
        LinearClassifier().infer(node, [TensorInfo(ml.common.DType.float32, (3, 2))], [None])


def test_unknown_tree_mode_is_refused() -> None:
    node = _node("TreeEnsembleClassifier", nodes_treeids=(0,), nodes_nodeids=(0,),
                 nodes_featureids=(0,), nodes_modes=("BRANCH_SOMETIMES",),
                 nodes_truenodeids=(0,), nodes_falsenodeids=(0,), classlabels_int64s=(0, 1))
    with pytest.raises(InvalidModelError, match="unknown node mode 'BRANCH_SOMETIMES'"):
        TreeEnsembleClassifier().infer(node, [TensorInfo(ml.common.DType.float32, (3, 2))],
                                       [None])


def test_a_split_on_a_missing_feature_is_an_input_error() -> None:
    op = TreeEnsembleClassifier()
    case = op.cases()[0]
    node = Node(op.op_type, ["x"], ["y", "z"], dict(case.attrs), name="n",
                domain="ai.onnx.ml", opset=3)
    with pytest.raises(InvalidInputError, match="reads feature 1, but the input has 1"):
        op.reference(node, [np.zeros((2, 1), np.float32)])


def test_label_encoder_refuses_keys_of_another_type() -> None:
    node = _node("LabelEncoder", keys_strings=("a",), values_int64s=(1,))
    with pytest.raises(InvalidModelError, match="input X is float32, but the keys are string"):
        LabelEncoder().infer(node, [TensorInfo(ml.common.DType.float32, (3,))], [None])
