"""The ai.onnx.ml domain (the operators classical-ML exporters such as skl2onnx write):
tree ensembles, linear models, preprocessing and encoders. All compute on the host by
their numpy reference (declared ``host_only``): they are small, branchy and often take
string tensors."""

from __future__ import annotations

from spawnml.op import OpDef

from .encoders import LabelEncoder, OneHotEncoder
from .linear import LinearClassifier, LinearRegressor
from .preprocess import (
    ArrayFeatureExtractor,
    Binarizer,
    FeatureVectorizer,
    Imputer,
    Normalizer,
    Scaler,
)
from .trees import TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor
from .zipmap import ZipMap

OPS: list[type[OpDef]] = [
    TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor, LinearClassifier,
    LinearRegressor, Normalizer, Scaler, Binarizer, Imputer, ArrayFeatureExtractor,
    FeatureVectorizer, LabelEncoder, OneHotEncoder, ZipMap,
]
