"""Sequences and optionals (host): SequenceEmpty/Construct/Insert/At/Erase/Length,
SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.

A sequence is a :class:`spawnml.values.TensorSequence` of host arrays and an optional is
its element or None (see ``spawnml.values``); no backend stores either, so these ops run
on the host, as declared. SequenceMap runs a body per element: it is control flow
(``spawnml.graph.control``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import InvalidInputError
from spawnml.op import Node, OpDef, TensorInfo
from spawnml.values import OptionalInfo, SequenceInfo, TensorSequence, ValueInfo

from .common import normalize_axis


class _HostValueOp(OpDef):
    """An op over sequence/optional values: host-only, computed with its reference."""

    host_only = True

    def _sequence(self, node: Node, info: Any, what: str = "input 0") -> SequenceInfo:
        if not isinstance(info, SequenceInfo):
            raise self.fail(node, f"{what} must be a sequence, got {_name(info)}")
        return info

    def _tensor(self, node: Node, info: Any, what: str) -> TensorInfo:
        if not isinstance(info, TensorInfo):
            raise self.fail(node, f"{what} must be a tensor, got {_name(info)}")
        return info


def _name(info: Any) -> str:
    from spawnml.values import describe_type

    return "nothing" if info is None else describe_type(info)


def _elem_dtype(seq: SequenceInfo) -> DType | None:
    return seq.elem.dtype if seq.elem is not None else None


def _position(node: Node, seq: Sequence, pos: Any, *, insert: bool = False) -> int:
    """A position in ``seq`` (negative from the end; insert may be len(seq))."""
    n = len(seq)
    p = int(np.asarray(pos).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise InvalidInputError(
            f"{node.describe()}: position {p} is outside [{-n}, {hi}] for a sequence of {n}"
        )
    return p + n if p < 0 else p


class SequenceEmpty(_HostValueOp):
    op_type = "SequenceEmpty"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        return [SequenceInfo(TensorInfo(as_dtype(int(node.attrs.get("dtype", 1))), None))]

    def reference(self, node: Node, inputs) -> list[Any]:
        return [TensorSequence([], as_dtype(int(node.attrs.get("dtype", 1))))]


class SequenceConstruct(_HostValueOp):
    op_type = "SequenceConstruct"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        infos = [self._tensor(node, i, f"input {k}") for k, i in enumerate(inputs)]
        if not infos:
            raise self.fail(node, "needs at least one input")
        if len({i.dtype for i in infos}) > 1:
            raise self.fail(node, f"inputs have different element types "
                                  f"{sorted(i.dtype.value for i in infos)}")  # fmt: skip
        shapes = {i.shape for i in infos}
        return [SequenceInfo(TensorInfo(infos[0].dtype, shapes.pop() if len(shapes) == 1
                                        else None))]  # fmt: skip

    def reference(self, node: Node, inputs) -> list[Any]:
        return [TensorSequence([np.array(a) for a in inputs])]


class SequenceInsert(_HostValueOp):
    op_type = "SequenceInsert"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        seq = self._sequence(node, inputs[0])
        t = self._tensor(node, inputs[1] if len(inputs) > 1 else None, "input 1 (tensor)")
        dtype = _elem_dtype(seq)
        if dtype is not None and dtype != t.dtype:
            raise self.fail(node, f"inserting a {t.dtype} tensor into a sequence of {dtype}")
        same = seq.elem is not None and seq.elem.shape == t.shape
        return [SequenceInfo(TensorInfo(t.dtype, t.shape if same else None))]

    def reference(self, node: Node, inputs) -> list[Any]:
        seq, tensor = list(inputs[0]), np.array(inputs[1])
        pos = inputs[2] if len(inputs) > 2 and inputs[2] is not None else len(seq)
        seq.insert(_position(node, seq, pos, insert=True), tensor)
        return [TensorSequence(seq, as_dtype(tensor.dtype))]


class SequenceAt(_HostValueOp):
    op_type = "SequenceAt"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        seq = self._sequence(node, inputs[0])
        if seq.elem is None:
            raise self.fail(node, "the sequence's element type is unknown")
        return [seq.elem]

    def reference(self, node: Node, inputs) -> list[Any]:
        seq = inputs[0]
        return [np.array(seq[_position(node, seq, inputs[1])])]


class SequenceErase(_HostValueOp):
    op_type = "SequenceErase"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        return [self._sequence(node, inputs[0])]

    def reference(self, node: Node, inputs) -> list[Any]:
        seq = list(inputs[0])
        pos = inputs[1] if len(inputs) > 1 and inputs[1] is not None else -1
        del seq[_position(node, seq, pos)]
        return [TensorSequence(seq, getattr(inputs[0], "dtype", None))]


class SequenceLength(_HostValueOp):
    op_type = "SequenceLength"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        self._sequence(node, inputs[0])
        return [TensorInfo(DType.int64, ())]

    def reference(self, node: Node, inputs) -> list[Any]:
        return [np.array(len(inputs[0]), np.int64)]


class SplitToSequence(_HostValueOp):
    op_type = "SplitToSequence"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        t = self._tensor(node, inputs[0], "input 0")
        return [SequenceInfo(TensorInfo(t.dtype, None))]

    def reference(self, node: Node, inputs) -> list[Any]:
        x = np.asarray(inputs[0])
        axis = normalize_axis(node, int(node.attrs.get("axis", 0)), x.ndim)
        split = inputs[1] if len(inputs) > 1 else None
        n = x.shape[axis]
        if split is None:
            parts = np.split(x, n, axis=axis) if n else []
            if not int(node.attrs.get("keepdims", 1)):
                parts = [np.squeeze(p, axis=axis) for p in parts]
            return [TensorSequence(parts, as_dtype(x.dtype))]
        split = np.asarray(split).astype(np.int64)
        if split.ndim == 0:
            size = int(split)
            if size <= 0:
                raise InvalidInputError(f"{node.describe()}: split size {size} must be positive")
            sizes = [size] * (n // size) + ([n % size] if n % size else [])
        else:
            sizes = [int(s) for s in split]
            if any(s < 0 for s in sizes) or sum(sizes) != n:
                raise InvalidInputError(f"{node.describe()}: split sizes {sizes} do not add up "
                                        f"to the axis length {n}")  # fmt: skip
        bounds = np.cumsum(sizes)[:-1]
        return [TensorSequence(np.split(x, bounds, axis=axis), as_dtype(x.dtype))]


class ConcatFromSequence(_HostValueOp):
    op_type = "ConcatFromSequence"
    since_version = 11

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        seq = self._sequence(node, inputs[0])
        if seq.elem is None:
            raise self.fail(node, "the sequence's element type is unknown")
        return [TensorInfo(seq.elem.dtype, None)]

    def reference(self, node: Node, inputs) -> list[Any]:
        seq = [np.asarray(a) for a in inputs[0]]
        if not seq:
            raise InvalidInputError(f"{node.describe()}: the sequence is empty")
        new_axis = int(node.attrs.get("new_axis", 0))
        rank = seq[0].ndim + (1 if new_axis else 0)
        axis = normalize_axis(node, int(node.attrs.get("axis", 0)), rank)
        return [np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)]


class Optional(_HostValueOp):
    op_type = "Optional"
    since_version = 15

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        if inputs and inputs[0] is not None:
            return [OptionalInfo(inputs[0])]
        declared = node.attrs.get("type")
        if declared is None:
            raise self.fail(node, "an Optional without an input needs the 'type' attribute")
        from spawnml.graph.importer import type_to_info

        return [OptionalInfo(type_to_info(declared, f"{node.describe()} attribute 'type'"))]

    def reference(self, node: Node, inputs) -> list[Any]:
        return [inputs[0] if inputs else None]


class OptionalHasElement(_HostValueOp):
    op_type = "OptionalHasElement"
    since_version = 15

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        return [TensorInfo(DType.bool, ())]

    def reference(self, node: Node, inputs) -> list[Any]:
        return [np.array(bool(inputs) and inputs[0] is not None)]


class OptionalGetElement(_HostValueOp):
    op_type = "OptionalGetElement"
    since_version = 15

    def infer(self, node: Node, inputs, values) -> list[ValueInfo]:
        info = inputs[0] if inputs else None
        if isinstance(info, OptionalInfo):
            if info.elem is None:
                raise InvalidInputError(f"{node.describe()}: the optional input is empty")
            return [info.elem]
        if info is None:
            raise self.fail(node, "input 0 is required")
        return [info]

    def reference(self, node: Node, inputs) -> list[Any]:
        if not inputs or inputs[0] is None:
            raise InvalidInputError(f"{node.describe()}: the optional input is empty")
        return [inputs[0]]


OPS: list[type[OpDef]] = [
    SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
    SequenceLength, SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement,
    OptionalGetElement,
]  # fmt: skip
