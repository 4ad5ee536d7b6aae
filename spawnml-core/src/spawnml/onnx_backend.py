"""An ``onnx.backend.base.Backend`` over InferenceSession, so ONNX's own backend tests run
against spawnml: ``SpawnMLBackend.prepare(model, device="CPU", backend="cpu")``.

``for_backend(name)`` returns a Backend class bound to one spawnml backend (the ONNX test
runner calls ``prepare``/``run_model`` without extra arguments)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx.backend.base as base

from .errors import InvalidInputError, SpawnMLError
from .session import InferenceSession


class SpawnMLRep(base.BackendRep):
    """A prepared model: runs an InferenceSession with positional or named inputs."""

    def __init__(self, session: InferenceSession) -> None:
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        names = [i.name for i in self.session.get_inputs()]
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feed = dict(zip(names, list(inputs)))
        feed = {k: _array(v) for k, v in feed.items()}
        return tuple(self.session.run(None, feed))


def _array(value: Any) -> Any:
    """TensorProtos (as some ONNX test data sets hold) become numpy arrays."""
    if hasattr(value, "dims") and hasattr(value, "data_type"):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


class SpawnMLBackend(base.Backend):
    """Runs ONNX models through spawnml; ``backend`` chooses the spawnml backend(s)."""

    default_backend: str = "cpu"

    @classmethod
    def _backends(cls, kwargs: dict[str, Any]) -> list[str]:
        chosen = kwargs.pop("backend", None) or kwargs.pop("backends", None) or cls.default_backend
        return chosen.split(",") if isinstance(chosen, str) else list(chosen)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> SpawnMLRep:
        backends = cls._backends(kwargs)
        strict = bool(kwargs.pop("strict", False))
        if kwargs:  # an ignored option would silently run something else than asked
            raise InvalidInputError(
                f"unknown option(s) {', '.join(sorted(kwargs))} (known: backend, backends, "
                "strict, and opset_version for run_node)")
        return SpawnMLRep(InferenceSession(model, backends=backends, strict=strict))

    @classmethod
    def run_model(
        cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls, node: Any, inputs: Sequence[np.ndarray], device: str = "CPU",
        outputs_info: Any = None, **kwargs: Any,
    ) -> tuple[np.ndarray, ...]:  # fmt: skip
        """Wrap one NodeProto in a model (opset from ``opset_version``, default latest)."""
        from onnx import helper

        opset = kwargs.pop("opset_version", None) or onnx_default_opset()
        ins = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype),
                                          np.asarray(a).shape)
            for n, a in zip(node.input, inputs) if n
        ]  # fmt: skip
        outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
        graph = helper.make_graph([node], "node", ins, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain, opset)])
        feed = [np.asarray(a) for n, a in zip(node.input, inputs) if n]
        return cls.run_model(model, feed, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


def onnx_default_opset() -> int:
    from onnx import defs

    return int(defs.onnx_opset_version())


def for_backend(name: str) -> type[SpawnMLBackend]:
    """A SpawnMLBackend subclass whose default spawnml backend is ``name``."""
    return type(
        f"SpawnMLBackend_{name.replace(',', '_')}", (SpawnMLBackend,), {"default_backend": name}
    )


def prepare(model: Any, device: str = "CPU", **kwargs: Any) -> SpawnMLRep:
    return SpawnMLBackend.prepare(model, device, **kwargs)


def run_model(model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
    return SpawnMLBackend.run_model(model, inputs, device, **kwargs)


def supports_device(device: str) -> bool:
    return SpawnMLBackend.supports_device(device)


__all__ = ["SpawnMLBackend", "SpawnMLRep", "for_backend", "prepare", "run_model",
           "supports_device", "SpawnMLError"]  # fmt: skip
