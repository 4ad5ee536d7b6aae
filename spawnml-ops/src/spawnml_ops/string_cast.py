"""Cast to and from ONNX STRING tensors (host only), as onnxruntime does it: numbers print
as ``%.8g`` (``NaN``, ``INF``, ``-INF``), integers in decimal, bools as ``1``/``0``;
strings parse as Python's ``float``/``int`` read them (``nan``, ``inf``, surrounding
spaces), a string that is no number raising InvalidInputError."""

from __future__ import annotations

import math

import numpy as np

from spawnml.dtypes import DType, as_string_array
from spawnml.errors import InvalidInputError
from spawnml.op import Node


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "INF" if v > 0 else "-INF"
    return f"{v:.8g}"


def to_strings(x: np.ndarray) -> np.ndarray:
    """Each element of a numeric or bool array as its text (an object array of str)."""
    if x.dtype.kind in "OUS":
        return as_string_array(x)
    if x.dtype == np.bool_:
        text = ["1" if v else "0" for v in x.reshape(-1).tolist()]
    elif x.dtype.kind in "iu":
        text = [str(int(v)) for v in x.reshape(-1).tolist()]
    else:
        text = [_float_text(float(v)) for v in x.reshape(-1).astype(np.float64).tolist()]
    out = np.empty(x.shape, dtype=object)
    out.reshape(-1)[:] = text
    return out


def _parse(text: str, to: DType) -> float | int | bool:
    if to.is_float:
        return float(text)
    value = int(text.strip())
    return value != 0 if to is DType.bool else value


def from_strings(node: Node, x: np.ndarray, to: DType) -> np.ndarray:
    """A string array parsed into ``to`` (strings stay strings)."""
    x = as_string_array(x, node.describe())
    if to.is_string:
        return x
    values = []
    for i, text in enumerate(x.reshape(-1).tolist()):
        try:
            values.append(_parse(text, to))
        except ValueError:
            raise InvalidInputError(f"{node.describe()}: element {i} ({text!r}) is not a "
                                    f"{to} number") from None
    if to.is_float:
        return np.array(values, np.float64).astype(to.numpy).reshape(x.shape)
    try:
        return np.array(values, dtype=to.numpy).reshape(x.shape)
    except OverflowError:
        raise InvalidInputError(f"{node.describe()}: a value is outside the {to} range") from None
