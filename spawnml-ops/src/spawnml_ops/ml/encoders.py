"""LabelEncoder (ai.onnx.ml 1, 2 and 4: keys/values as lists or tensors) and
OneHotEncoder."""

from __future__ import annotations

from typing import Any

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.op import Node, OpCase, TensorInfo

from .common import MLOp

_KINDS = (("strings", DType.string), ("int64s", DType.int64), ("floats", DType.float32))
_DEFAULTS = {DType.string: "_Unused", DType.int64: -1, DType.float32: -0.0}


def _key(value: Any) -> Any:
    """A dict key for an element (NaN keys match NaN elements)."""
    if isinstance(value, float) and value != value:
        return "__nan__"
    return value


class LabelEncoder(MLOp):
    """Maps each element through ``keys -> values`` (missing: the default)."""

    op_type = "LabelEncoder"
    since_version = 2

    def _table(self, node: Node) -> tuple[list, list, DType, DType, Any]:
        keys = vals = None
        key_dt = val_dt = DType.string
        if node.opset >= 4 and "keys_tensor" in node.attrs:
            k = np.asarray(node.attrs["keys_tensor"])
            keys, key_dt = k.reshape(-1).tolist(), as_dtype(k.dtype)
        if node.opset >= 4 and "values_tensor" in node.attrs:
            v = np.asarray(node.attrs["values_tensor"])
            vals, val_dt = v.reshape(-1).tolist(), as_dtype(v.dtype)
        for suffix, dt in _KINDS:
            if keys is None and f"keys_{suffix}" in node.attrs:
                keys, key_dt = list(node.attrs[f"keys_{suffix}"]), dt
            if vals is None and f"values_{suffix}" in node.attrs:
                vals, val_dt = list(node.attrs[f"values_{suffix}"]), dt
        if keys is None or vals is None:
            raise self.fail(node, "needs keys (keys_* or keys_tensor) and values "
                                  "(values_* or values_tensor)")
        if len(keys) != len(vals):
            raise self.fail(node, f"{len(keys)} keys but {len(vals)} values")
        default: Any = _DEFAULTS.get(val_dt, 0)
        if "default_tensor" in node.attrs:
            default = np.asarray(node.attrs["default_tensor"]).reshape(-1).tolist()[0]
        else:
            name = {DType.string: "default_string", DType.int64: "default_int64",
                    DType.float32: "default_float"}.get(val_dt)
            default = self.attr(node, name, default) if name else default
        return keys, vals, key_dt, val_dt, default

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None:
            raise self.fail(node, "input X is required")
        _, _, key_dt, val_dt, _ = self._table(node)
        if x.dtype is not key_dt and not (x.dtype.is_int and key_dt.is_int) and not (
                x.dtype.is_float and key_dt.is_float):
            raise self.fail(node, f"input X is {x.dtype}, but the keys are {key_dt}")
        return [TensorInfo(val_dt, x.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        keys, vals, _, val_dt, default = self._table(node)
        table = {_key(k): v for k, v in zip(keys, vals)}
        flat = [table.get(_key(v), default) for v in x.reshape(-1).tolist()]
        out = np.empty(x.shape, dtype=val_dt.numpy)
        out.reshape(-1)[:] = flat
        return [out]

    def cases(self) -> list[OpCase]:
        words = np.array(["a", "b", "zz", "c"], dtype=object)
        return [
            OpCase("string_to_int", [words], {"keys_strings": ("a", "b", "c"),
                                              "values_int64s": (1, 2, 3), "default_int64": 42},
                   opset=2),
            OpCase("int_to_string", [np.array([[1, 7], [3, 1]], np.int64)], {
                "keys_int64s": (1, 3), "values_strings": ("one", "three")}, opset=2),
            OpCase("float_tensor_keys", [np.array([0.5, np.nan, 2.0], np.float32)], {
                "keys_tensor": np.array([0.5, np.nan], np.float32),
                "values_tensor": np.array([10, 20], np.int16),
                "default_tensor": np.array([-7], np.int16)}, opset=4),
        ]


class OneHotEncoder(MLOp):
    """X.shape + [categories] float32: 1 at each element's category. ``zeros=0``: an
    element in no category is an error."""

    op_type = "OneHotEncoder"

    def _cats(self, node: Node) -> tuple[dict, bool]:
        ints, strs = self.attr(node, "cats_int64s"), self.attr(node, "cats_strings")
        if (ints is None or not len(ints)) == (strs is None or not len(strs)):
            raise self.fail(node, "exactly one of cats_int64s and cats_strings is required")
        cats = [int(v) for v in ints] if ints is not None and len(ints) else [str(v)
                                                                            for v in strs]
        return {c: i for i, c in enumerate(cats)}, isinstance(cats[0], str)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None:
            raise self.fail(node, "input X is required")
        cats, strings = self._cats(node)
        if strings != x.dtype.is_string:
            raise self.fail(node, f"input X is {x.dtype}, the categories are "
                                  f"{'strings' if strings else 'int64s'}")
        shape = None if x.shape is None else (*x.shape, len(cats))
        return [TensorInfo(DType.float32, shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        cats, strings = self._cats(node)
        flat = x.reshape(-1).tolist() if strings else x.reshape(-1).astype(np.int64).tolist()
        out = np.zeros((len(flat), len(cats)), np.float32)
        zeros = int(self.attr(node, "zeros", 1))
        for i, v in enumerate(flat):
            j = cats.get(v)
            if j is not None:
                out[i, j] = 1.0
            elif not zeros:
                from spawnml.errors import InvalidInputError

                raise InvalidInputError(f"{node.describe()}: value {v!r} is in no category "
                                        "(zeros=0)")
        return [out.reshape(*x.shape, len(cats))]

    def cases(self) -> list[OpCase]:
        return [OpCase("ints", [np.array([[1, 5], [3, 1]], np.int64)],
                       {"cats_int64s": (1, 2, 3)}),
                OpCase("strings", [np.array(["b", "a", "q"], dtype=object)],
                       {"cats_strings": ("a", "b")})]
