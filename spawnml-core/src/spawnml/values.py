"""Values that are not tensors: ONNX sequences and optionals.

At run time a sequence is a :class:`TensorSequence` (a ``list`` of host arrays that also
knows its element type, so an empty one keeps it), an optional is its element or ``None``
when empty, as onnxruntime gives and takes them. Their static descriptions are
:class:`SequenceInfo` and :class:`OptionalInfo`; a shape is never static, so every node
reading one is specialised when it runs, on the host (no backend stores a sequence).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import DType, dtype as as_dtype
from .op import TensorInfo
from .tensor import DeviceTensor


@dataclass(frozen=True)
class SequenceInfo:
    """seq(tensor(T)): the element type; ``elem.shape`` where every element shares it."""

    elem: TensorInfo | None
    is_static = False

    def describe(self) -> str:
        return f"seq({describe_type(self.elem)})"


@dataclass(frozen=True)
class OptionalInfo:
    """optional(T): a tensor or sequence, or nothing."""

    elem: TensorInfo | SequenceInfo | None
    is_static = False

    def describe(self) -> str:
        return f"optional({describe_type(self.elem)})"


ValueInfo = TensorInfo | SequenceInfo | OptionalInfo


def describe_type(info: ValueInfo | None) -> str:
    """The ONNX type string: tensor(float), seq(tensor(int64)), optional(...)."""
    if info is None:
        return "tensor(undefined)"
    if isinstance(info, TensorInfo):
        return info.dtype.onnx_type_name
    return info.describe()


class TensorSequence(list):
    """A sequence value: a list of host arrays and the element type (None: not known)."""

    def __init__(self, items: Iterable[Any] = (), dtype: DType | None = None) -> None:
        super().__init__(items)
        self.dtype = dtype if dtype is not None or not self else as_dtype(self[0].dtype)


def is_tensor(value: Any) -> bool:
    return isinstance(value, (np.ndarray, DeviceTensor))


def info_of(value: Any) -> ValueInfo:
    """The description of a run-time value."""
    if isinstance(value, DeviceTensor):
        return TensorInfo(value.dtype, tuple(value.shape))
    if value is None:
        return OptionalInfo(None)
    if isinstance(value, list):
        dtype = getattr(value, "dtype", None)
        shapes = {tuple(np.shape(v)) for v in value}
        if dtype is None and value:
            dtype = as_dtype(np.asarray(value[0]).dtype)
        if dtype is None:
            return SequenceInfo(None)
        return SequenceInfo(TensorInfo(dtype, shapes.pop() if len(shapes) == 1 else None))
    array = np.asarray(value)
    return TensorInfo(as_dtype(array.dtype), tuple(array.shape))


def on_host(value: Any) -> Any:
    """A value with every tensor in it on the host (DeviceTensors are downloaded)."""
    if isinstance(value, DeviceTensor):
        return value.numpy()
    if isinstance(value, list):
        return TensorSequence([on_host(v) for v in value], getattr(value, "dtype", None))
    return value


def close_value(value: Any) -> None:
    """Close every DeviceTensor handle a value holds."""
    if isinstance(value, DeviceTensor):
        value.close()
    elif isinstance(value, list):
        for v in value:
            close_value(v)
