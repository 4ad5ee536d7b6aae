"""The KV cache as DeviceTensors that never leave the device between steps.

After each model run the ``present`` outputs (or the windows the step graph cuts from them,
see :mod:`.decode_graph`) become the next ``past`` feeds by handle swap, so every decode
step of a length-stable cache has the same input shapes and replays one recorded plan:

* windowed (a model that honours ``attention_mask`` + ``position_ids`` over a padded cache):
  a window of fixed capacity, padded in front with masked-out positions. The model's Concat
  makes ``present`` one position longer than ``past``; the step's window outputs drop the
  first (empty) position. When the window is full it grows by ``block`` positions (a device
  Pad, and a new plan once per block).
* shared (GroupQueryAttention, which reads the sequence lengths from the mask): one buffer
  of ``capacity`` positions, allocated by the first step, as onnxruntime-genai's
  ``past_present_share_buffer``; the mask is ``capacity`` long, ones over the tokens, so
  ``seqlens_k`` is the only value that changes between steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.tensor import DeviceTensor

from .decode_graph import window_name
from .device_ops import DeviceOps
from .layout import CacheLayout


class KVCache:
    """``past`` tensors of ``capacity`` positions, of which ``length`` hold tokens (the last
    ones of a window, the first ones of a shared buffer)."""

    def __init__(self, layout: CacheLayout, ops: DeviceOps, block: int,
                 shared_capacity: int = 0) -> None:
        self.layout = layout
        self.ops = ops
        self.block = block if layout.windowed else 1
        self.shared = not layout.windowed and shared_capacity > 0
        self.tensors: list[DeviceTensor] = []
        self.capacity = shared_capacity if self.shared else 0
        self.length = 0

    def feeds(self) -> dict[str, DeviceTensor | np.ndarray]:
        """The past inputs: empty host arrays before the first step, then device tensors."""
        if not self.tensors:
            empty = np.zeros(self.layout.past_shape(0), self.layout.dtype.numpy)
            return {name: empty for name in self.layout.past}
        return dict(zip(self.layout.past, self.tensors, strict=True))

    def attention_mask(self, new: int) -> np.ndarray:
        """0 over the empty positions, 1 over the tokens: [1, capacity + new] for a window
        (empty front), [1, capacity] for a shared buffer (empty back)."""
        if self.shared:
            mask = np.zeros((1, self.capacity), np.int64)
            mask[0, : self.length + new] = 1
            return mask
        mask = np.ones((1, self.capacity + new), np.int64)
        mask[0, : self.capacity - self.length] = 0
        return mask

    def slides(self) -> bool:
        """Whether this step's window outputs are the next past (the window has room)."""
        return self.layout.windowed and self.length < self.capacity

    def outputs(self) -> list[str]:
        """The model outputs this step's cache update takes."""
        if self.slides():
            return [window_name(p) for p in self.layout.present]
        return list(self.layout.present)

    def update(self, outs: Sequence[DeviceTensor], new: int) -> None:
        """Take ownership of this step's :meth:`outputs` (``new`` tokens were added) and
        make them the next past: a slid window, a grown one, or the shared buffer."""
        length = self.length + new
        if self.shared or self.slides():
            nxt, capacity = list(outs), self.capacity
        elif self.block > 1:
            nxt, capacity = self.ops.grow(outs), self.capacity + new + self.block - 1
            for t in outs:
                t.close()
        else:
            nxt, capacity = list(outs), self.capacity + new
        self.close()
        self.tensors, self.capacity, self.length = nxt, capacity, length

    def close(self) -> None:
        """Release the cache's device buffers."""
        for t in self.tensors:
            t.close()
        self.tensors = []
