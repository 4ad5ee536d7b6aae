"""The one helper graph run beside the model on the generator's backends: grow the KV cache
window by a block of empty positions (a device Pad), so the cache never leaves the device.
It is one InferenceSession with symbolic dims; its plans are cached per shape and replayed
like the model's. (Sliding the window and taking the last logits or their argmax are outputs
of the model's own step graph, :mod:`.decode_graph`.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.session import InferenceSession
from spawnml.tensor import DeviceTensor

_OPSET = 17


def grow_model(count: int, elem: int, extra: int) -> bytes:
    """``count`` tensors in, each with ``extra`` zero positions in front along axis 2 out."""
    from onnx import helper, numpy_helper

    def value(name: str) -> Any:
        return helper.make_tensor_value_info(name, elem, ["b", "h", f"{name}_len", "d"])

    pads = numpy_helper.from_array(np.array([0, 0, extra, 0, 0, 0, 0, 0], np.int64), "pads")
    nodes = [helper.make_node("Constant", [], ["pads"], value=pads)]
    nodes += [helper.make_node("Pad", [f"in{i}", "pads"], [f"out{i}"], mode="constant")
              for i in range(count)]
    graph = helper.make_graph(nodes, "kv_grow", [value(f"in{i}") for i in range(count)],
                              [value(f"out{i}") for i in range(count)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model.SerializeToString()


class DeviceOps:
    """The grow helper for one generator, on the same backend instances as the model."""

    def __init__(self, backends: Sequence[Any], count: int, elem: int, block: int) -> None:
        self.backends = list(backends)
        self._count, self._elem, self._block = count, elem, block
        self._grow: InferenceSession | None = None

    def grow(self, tensors: Sequence[DeviceTensor]) -> list[DeviceTensor]:
        """Each tensor with ``block - 1`` empty positions in front (new handles)."""
        if self._grow is None:
            self._grow = InferenceSession(
                grow_model(self._count, self._elem, self._block - 1), backends=self.backends,
                options={"log_fallback": False})
        feeds = {f"in{i}": t for i, t in enumerate(tensors)}
        return self._grow.run([f"out{i}" for i in range(len(tensors))], feeds, device=True)

    def close(self) -> None:
        if self._grow is not None:
            self._grow.close()
            self._grow = None
