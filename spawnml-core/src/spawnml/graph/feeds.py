"""Feed validation: every problem raises InvalidInputError naming the input, the expected
and the given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtypes import as_string_array, dtype as as_dtype
from ..errors import InvalidInputError
from ..tensor import DeviceTensor
from ..values import OptionalInfo, SequenceInfo, TensorSequence
from .ir import Value


def _describe(shape: Sequence[Any] | None) -> str:
    if shape is None:
        return "any shape"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def validate_feeds(inputs: Sequence[Value], feed: Mapping[str, Any]) -> dict[str, Any]:
    """Check names, dtypes, ranks and fixed dims; returns arrays or DeviceTensors by name."""
    if not isinstance(feed, Mapping):
        raise InvalidInputError(
            f"feed must be a dict of input name -> array, got {type(feed).__name__}"
        )
    expected = {v.name: v for v in inputs}
    extra = sorted(set(feed) - set(expected))
    if extra:
        raise InvalidInputError(
            f"unknown input name(s) {extra}; the model's inputs are {sorted(expected)}"
        )
    missing = [n for n in expected if n not in feed]
    if missing:
        raise InvalidInputError(
            f"missing input(s) {missing}; the model's inputs are {sorted(expected)}"
        )
    out: dict[str, Any] = {}
    symbols: dict[str, tuple[str, int]] = {}
    for name, value in feed.items():
        v = expected[name]
        if isinstance(v.info, (SequenceInfo, OptionalInfo)):
            out[name] = _container(name, v.info, value)
            continue
        if isinstance(value, DeviceTensor):
            if value.closed:
                raise InvalidInputError(f"input {name!r}: the DeviceTensor was closed")
            dt, shape = value.dtype, value.shape
        else:
            try:
                value = np.asarray(value)
            except Exception as exc:  # noqa: BLE001 - ragged lists and other junk
                raise InvalidInputError(
                    f"input {name!r}: cannot convert to an array: {exc}"
                ) from None
            if value.dtype.kind in "OUS":  # strings: object arrays of str (as onnxruntime)
                value = as_string_array(value, f"input {name!r}")
            try:
                dt = as_dtype(value.dtype)
            except InvalidInputError:
                raise InvalidInputError(
                    f"input {name!r}: unsupported dtype {value.dtype}"
                ) from None
            shape = tuple(value.shape)
        info = v.info
        if info is not None:
            if dt != info.dtype:
                raise InvalidInputError(
                    f"input {name!r}: expected dtype {info.dtype.onnx_type_name}, "
                    f"got {dt.onnx_type_name} ({dt})"
                )
            if info.shape is not None:
                if len(shape) != len(info.shape):
                    raise InvalidInputError(
                        f"input {name!r}: expected rank {len(info.shape)} shape "
                        f"{_describe(info.shape)}, got rank {len(shape)} shape {tuple(shape)}"
                    )
                for axis, (want, got) in enumerate(zip(info.shape, shape)):
                    if isinstance(want, int) and want != got:
                        raise InvalidInputError(
                            f"input {name!r}: dimension {axis} must be {want} (shape "
                            f"{_describe(info.shape)}), got {got} (shape {tuple(shape)})"
                        )
                    if isinstance(want, str):
                        seen = symbols.setdefault(want, (name, got))
                        if seen[1] != got:
                            raise InvalidInputError(
                                f"input {name!r}: dimension {axis} ({want!r}) is {got}, but "
                                f"input {seen[0]!r} gave {want!r} = {seen[1]}"
                            )
        out[name] = value
    return out


def _container(name: str, info: SequenceInfo | OptionalInfo, value: Any) -> Any:
    """A sequence feed as a TensorSequence of host arrays of the declared element type;
    an optional feed as None (empty) or its element."""
    if isinstance(info, OptionalInfo):
        if value is None:
            return None
        if isinstance(info.elem, SequenceInfo):
            return _container(name, info.elem, value)
        return validate_feeds([Value(name, info.elem)], {name: value})[name]
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(
            f"input {name!r}: expected a sequence ({info.describe()}) as a list of arrays, got "
            f"{type(value).__name__}"
        )
    items = []
    for i, item in enumerate(value):
        elem = Value(f"{name}[{i}]", info.elem and type(info.elem)(info.elem.dtype, None))
        checked = validate_feeds([elem], {elem.name: item})[elem.name]
        items.append(checked.numpy() if isinstance(checked, DeviceTensor) else checked)
    return TensorSequence(items, info.elem.dtype if info.elem is not None else None)

