"""Run pipeline kernels on one backend, keeping intermediate images on the device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml import get_backend
from spawnml.backend import Backend
from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.kernel import Kernel
from spawnml.tensor import DeviceTensor


class Device:
    """One backend plus helpers to launch kernels on DeviceTensors or host arrays."""

    def __init__(self, backend: Backend | str) -> None:
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.launches: list[str] = []  # kernel names, in launch order (diagnostics, tests)

    @property
    def name(self) -> str:
        return self.backend.name

    def put(self, array: np.ndarray) -> DeviceTensor:
        """Upload a host array."""
        return DeviceTensor.from_numpy(self.backend, np.ascontiguousarray(array))

    def run(
        self,
        k: Kernel,
        inputs: Sequence[DeviceTensor | np.ndarray],
        shape: Sequence[int],
        dtype: DType | str | np.dtype,
        **consts: Any,
    ) -> DeviceTensor:
        """Launch ``k`` once over an output of ``shape``; host inputs are uploaded for the
        launch and freed after it (device queues are in order, so that is safe), as are
        tensors living on another backend (a model output the session placed elsewhere)."""
        dt = as_dtype(dtype)
        uploaded: list[DeviceTensor] = []
        tensors: list[DeviceTensor] = []
        for a in inputs:
            if isinstance(a, DeviceTensor) and a.backend is self.backend:
                tensors.append(a)
            else:
                uploaded.append(self.put(a.numpy() if isinstance(a, DeviceTensor) else a))
                tensors.append(uploaded[-1])
        try:
            spec = k.specialize(
                [(t.shape, t.dtype) for t in tensors], (tuple(shape), dt), **consts
            )
            program = self.backend.compile(spec)
            out = DeviceTensor.empty(self.backend, shape, dt)
            self.launches.append(k.name)
            if out.size:
                self.backend.launch(program, out.buffer, [t.buffer for t in tensors])
            return out
        finally:
            for t in uploaded:
                t.close()

    def run_model(self, session: Any, input_name: str, x: DeviceTensor | np.ndarray,
                  output: str) -> DeviceTensor:
        """One run of ``session`` on ``x``; the output stays on the device."""
        (y,) = session.run([output], {input_name: x}, device=True)
        return y

    def get(self, tensor: DeviceTensor, close: bool = True) -> np.ndarray:
        """Download a tensor to the host (and free it unless ``close=False``)."""
        try:
            return tensor.numpy()
        finally:
            if close:
                tensor.close()
