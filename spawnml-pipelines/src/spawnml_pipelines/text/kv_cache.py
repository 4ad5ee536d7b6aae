"""The KV cache as DeviceTensors that never leave the device between steps.

After each model run the ``present`` outputs become the next ``past`` feeds by handle swap.
For a model that honours ``attention_mask`` + ``position_ids`` (``CacheLayout.windowed``)
the cache is a window of fixed capacity, padded in front with masked-out positions: the
model's Concat makes ``present`` one position longer than ``past``, and the window slides
by dropping the first (empty) position on the device, so every decode step has the same
input shapes and replays one recorded plan. When the window is full it grows by ``block``
positions (a new plan once per block). Other models (GroupQueryAttention reads lengths from
the mask) grow by one position per step, as onnxruntime's own loop does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.tensor import DeviceTensor

from .device_ops import DeviceOps
from .layout import CacheLayout


class KVCache:
    """``past`` tensors of ``capacity`` positions, of which the last ``length`` hold tokens."""

    def __init__(self, layout: CacheLayout, ops: DeviceOps, block: int) -> None:
        self.layout = layout
        self.ops = ops
        self.block = block if layout.windowed else 1
        self.tensors: list[DeviceTensor] = []
        self.capacity = 0
        self.length = 0

    def feeds(self) -> dict[str, DeviceTensor | np.ndarray]:
        """The past inputs: empty host arrays before the first step, then device tensors."""
        if not self.tensors:
            empty = np.zeros(self.layout.past_shape(0), self.layout.dtype.numpy)
            return {name: empty for name in self.layout.past}
        return dict(zip(self.layout.past, self.tensors, strict=True))

    def attention_mask(self, new: int) -> np.ndarray:
        """[1, capacity + new]: 0 over the empty front of the window, 1 over the tokens."""
        mask = np.ones((1, self.capacity + new), np.int64)
        mask[0, : self.capacity - self.length] = 0
        return mask

    def update(self, present: Sequence[DeviceTensor], new: int) -> None:
        """Take ownership of the model's ``present`` outputs (``new`` tokens were added) and
        make them the next past: slide a window with room left, grow a full one."""
        length, capacity = self.length + new, self.capacity + new
        if length < capacity:
            nxt, capacity = self.ops.slide(present), capacity - 1
        elif self.block > 1:
            nxt, capacity = self.ops.grow(present), capacity + self.block - 1
        else:
            nxt = list(present)
        kept = {id(t) for t in nxt}
        for t in present:
            if id(t) not in kept:
                t.close()
        self.close()
        self.tensors, self.capacity, self.length = list(nxt), capacity, length

    def close(self) -> None:
        """Release the cache's device buffers."""
        for t in self.tensors:
            t.close()
        self.tensors = []
