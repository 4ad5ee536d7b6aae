"""Where a Scan node's states and sequences are: which inputs, which axes, which directions.

Scan 9+ reads ``N`` states then ``num_scan_inputs`` sequences, each scanned along its
``scan_input_axes`` entry (reversed where ``scan_input_directions`` is 1); the body gets one
slice per step and its scan outputs are stacked along ``scan_output_axes`` (in reverse order
where ``scan_output_directions`` is 1). Scan 8 has a batch axis 0 on every state and
sequence, an optional ``sequence_lens`` input first, and scans axis 1; the body runs once
per batch element.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidModelError
from ..op import Node, TensorInfo
from .ir import Graph

Shape = tuple | None


def _axis(node: Node, axis: int, rank: int | None, what: str) -> int:
    if rank is None:
        if axis < 0:
            raise InvalidModelError(f"{node.describe()}: {what} axis {axis} needs a known rank")
        return axis
    if not -rank <= axis < rank:
        raise InvalidModelError(f"{node.describe()}: {what} axis {axis} is out of range for "
                                f"rank {rank}")  # fmt: skip
    return axis % rank


@dataclass(frozen=True)
class ScanLayout:
    """The resolved attributes of one Scan node for inputs of known ranks."""

    batched: bool  # Scan 8
    n_states: int
    state_inputs: tuple[int, ...]  # node input indices
    scan_inputs: tuple[int, ...]
    input_axes: tuple[int, ...]  # in the node input (batch axis included for Scan 8)
    input_reverse: tuple[bool, ...]
    output_axes_attr: tuple[int, ...]
    output_reverse: tuple[bool, ...]
    has_lengths: bool  # Scan 8 with its sequence_lens input given (input 0)

    @classmethod
    def of(cls, node: Node, body: Graph, shapes: Sequence[Shape]) -> ScanLayout:
        m = int(node.attrs.get("num_scan_inputs", 0))
        batched = node.opset < 9
        first = 1 if batched else 0
        n = len(node.inputs) - first - m
        if m < 1 or n < 0:
            raise InvalidModelError(
                f"{node.describe()}: num_scan_inputs={m} does not fit {len(node.inputs)} inputs"
            )
        if len(body.inputs) != n + m:
            raise InvalidModelError(f"{node.describe()}: the body has {len(body.inputs)} inputs "
                                    f"for {n} states and {m} scan inputs")  # fmt: skip
        k = len(body.outputs) - n
        if k < 0:
            raise InvalidModelError(f"{node.describe()}: the body has {len(body.outputs)} "
                                    f"outputs for {n} states")  # fmt: skip
        scan_idx = tuple(range(first + n, first + n + m))
        if batched:
            rev = [int(d) for d in node.attrs.get("directions", [0] * m)]
            in_axes = (1,) * m
            out_attr, out_rev = (1,) * k, (False,) * k
        else:
            rev = [int(d) for d in node.attrs.get("scan_input_directions", [0] * m)]
            axes = [int(a) for a in node.attrs.get("scan_input_axes", [0] * m)]
            in_axes = tuple(
                _axis(node, a, None if shapes[i] is None else len(shapes[i]), "scan input")
                for a, i in zip(axes, scan_idx)
            )
            out_attr = tuple(int(a) for a in node.attrs.get("scan_output_axes", [0] * k))
            out_rev = tuple(bool(d) for d in node.attrs.get("scan_output_directions", [0] * k))
        if len(rev) != m or len(in_axes) != m or len(out_attr) != k or len(out_rev) != k:
            raise InvalidModelError(f"{node.describe()}: the axis/direction attributes do not "
                                    f"match {m} scan inputs and {k} scan outputs")  # fmt: skip
        lens = batched and bool(node.inputs and node.inputs[0])
        return cls(batched, n, tuple(range(first, first + n)), scan_idx, in_axes,
                   tuple(bool(d) for d in rev), out_attr, out_rev, lens)  # fmt: skip

    def length(self, shapes: Sequence[Shape]) -> int | None:
        """The number of steps (every scan input's length along its axis must agree)."""
        found = {
            shapes[i][a]
            for i, a in zip(self.scan_inputs, self.input_axes)
            if shapes[i] is not None and len(shapes[i]) > a
        }
        ints = {d for d in found if isinstance(d, int)}
        if len(ints) > 1:
            raise InvalidModelError(f"Scan: the scan inputs have different lengths {sorted(ints)}")
        return ints.pop() if ints and len(found) == 1 else None

    def state_slice(self, info: TensorInfo) -> TensorInfo:
        """A state as the body sees it."""
        if not self.batched or info.shape is None:
            return info
        return TensorInfo(info.dtype, info.shape[1:])

    def input_slice(self, k: int, info: TensorInfo) -> TensorInfo:
        """One step of scan input ``k`` as the body sees it."""
        if info.shape is None:
            return info
        drop = {0, self.input_axes[k]} if self.batched else {self.input_axes[k]}
        return TensorInfo(info.dtype, tuple(d for i, d in enumerate(info.shape) if i not in drop))

    def state_output(self, info: TensorInfo, batch: int | None = None) -> TensorInfo:
        if not self.batched or info.shape is None:
            return info
        return TensorInfo(info.dtype, (batch, *info.shape))

    def output_axis(self, k: int, slice_rank: int) -> int:
        """Where the steps of scan output ``k`` are stacked (in the node output)."""
        if self.batched:
            return 1
        rank = slice_rank + 1
        axis = self.output_axes_attr[k]
        if not -rank <= axis < rank:
            raise InvalidModelError(f"Scan: scan output axis {axis} is out of range for rank "
                                    f"{rank}")  # fmt: skip
        return axis % rank

    def output_stack(self, k: int, info: TensorInfo, steps: int | None = None,
                     batch: int | None = None) -> TensorInfo:
        """Scan output ``k``: the body's slices stacked along their axis."""
        if info.shape is None:
            return info
        shape = list(info.shape)
        shape.insert(self.output_axis(k, len(shape)) - (1 if self.batched else 0), steps)
        if self.batched:
            shape.insert(0, batch)
        return TensorInfo(info.dtype, tuple(shape))
