"""Tiny ONNX graphs run on the generator's backends, so that the KV cache and the logits
stay on the device: slide or grow the cache window, take the last position's logits (or
their argmax). Each is one InferenceSession with symbolic dims; its plans are cached per
shape and replayed like the model's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.session import InferenceSession
from spawnml.tensor import DeviceTensor

_OPSET = 17


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], name: str) -> bytes:
    from onnx import helper

    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model.SerializeToString()


def _cache_value(name: str, elem: int) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, ["b", "h", f"{name}_len", "d"])


def slide_model(count: int, elem: int) -> bytes:
    """``count`` tensors in, each without its first position along axis 2 out."""
    from onnx import helper, numpy_helper

    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              (("starts", [1]), ("ends", [np.iinfo(np.int64).max]), ("axes", [2]))]
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in consts]
    nodes += [helper.make_node("Slice", [f"in{i}", "starts", "ends", "axes"], [f"out{i}"])
              for i in range(count)]
    return _model(nodes, [_cache_value(f"in{i}", elem) for i in range(count)],
                  [_cache_value(f"out{i}", elem) for i in range(count)], "kv_slide")


def grow_model(count: int, elem: int, extra: int) -> bytes:
    """``count`` tensors in, each with ``extra`` zero positions in front along axis 2 out."""
    from onnx import helper, numpy_helper

    pads = numpy_helper.from_array(np.array([0, 0, extra, 0, 0, 0, 0, 0], np.int64), "pads")
    nodes = [helper.make_node("Constant", [], ["pads"], value=pads)]
    nodes += [helper.make_node("Pad", [f"in{i}", "pads"], [f"out{i}"], mode="constant")
              for i in range(count)]
    return _model(nodes, [_cache_value(f"in{i}", elem) for i in range(count)],
                  [_cache_value(f"out{i}", elem) for i in range(count)], "kv_grow")


def last_logits_model(elem: int, argmax: bool) -> bytes:
    """logits [b, s, v] -> ``last`` [v] (position s-1 of batch 0), or its ``argmax`` [1]."""
    from onnx import TensorProto, helper, numpy_helper

    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              (("starts", [-1]), ("ends", [np.iinfo(np.int64).max]), ("axes", [1]),
               ("flat", [-1]))]
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in consts]
    nodes += [
        helper.make_node("Slice", ["logits", "starts", "ends", "axes"], ["sliced"]),
        helper.make_node("Reshape", ["sliced", "flat"], ["last"]),
    ]
    out = helper.make_tensor_value_info("last", elem, ["v"])
    if argmax:
        nodes.append(helper.make_node("ArgMax", ["last"], ["argmax"], axis=0, keepdims=1))
        out = helper.make_tensor_value_info("argmax", TensorProto.INT64, [1])
    return _model(nodes, [helper.make_tensor_value_info("logits", elem, ["b", "s", "v"])],
                  [out], "last_logits")


class DeviceOps:
    """The helper sessions for one generator, on the same backend instances as the model."""

    def __init__(self, backends: Sequence[Any], count: int, elem: int, block: int) -> None:
        self.backends = list(backends)
        self._count, self._elem, self._block = count, elem, block
        self._sessions: dict[str, InferenceSession] = {}

    def _session(self, kind: str) -> InferenceSession:
        if kind not in self._sessions:
            build = {"slide": lambda: slide_model(self._count, self._elem),
                     "grow": lambda: grow_model(self._count, self._elem, self._block - 1),
                     "last": lambda: last_logits_model(self._elem, False),
                     "argmax": lambda: last_logits_model(self._elem, True)}[kind]
            self._sessions[kind] = InferenceSession(build(), backends=self.backends,
                                                    options={"log_fallback": False})
        return self._sessions[kind]

    def _each(self, kind: str, tensors: Sequence[DeviceTensor]) -> list[DeviceTensor]:
        feeds = {f"in{i}": t for i, t in enumerate(tensors)}
        return self._session(kind).run([f"out{i}" for i in range(len(tensors))], feeds,
                                       device=True)

    def slide(self, tensors: Sequence[DeviceTensor]) -> list[DeviceTensor]:
        """Each tensor without its first cache position (new handles; inputs untouched)."""
        return self._each("slide", tensors)

    def grow(self, tensors: Sequence[DeviceTensor]) -> list[DeviceTensor]:
        """Each tensor with ``block - 1`` empty positions in front (new handles)."""
        return self._each("grow", tensors)

    def last_logits(self, logits: DeviceTensor) -> np.ndarray:
        """The last position's logits, copied to the host (one row of floats)."""
        (row,) = self._session("last").run(["last"], {"logits": logits})
        return np.asarray(row)

    def argmax(self, logits: DeviceTensor) -> int:
        """The argmax of the last position's logits, computed on the device."""
        (best,) = self._session("argmax").run(["argmax"], {"logits": logits})
        return int(np.asarray(best).reshape(-1)[0])

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
