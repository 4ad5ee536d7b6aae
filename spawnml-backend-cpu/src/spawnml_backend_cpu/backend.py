"""The CPU backend: host memory buffers and kernels rendered to vectorised numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities, DeviceKind
from spawnml.dtypes import DType
from spawnml.kernel.ir import KernelIR
from spawnml.probing import cpu_model

from .executor import NumpyProgram, compile_numpy


class CPUBackend(Backend):
    """Always available: buffers are numpy byte arrays, kernels run as numpy code."""

    name = "cpu"
    _CAPS = Capabilities(
        dtypes=frozenset(DType) - {DType.bfloat16},
        float16_arithmetic=True,
        max_buffer_bytes=1 << 40,
        max_kernel_inputs=1 << 16,
    )

    @classmethod
    def probe(cls) -> BackendInfo:
        return BackendInfo(
            name=cls.name,
            available=True,
            device=f"{cpu_model()} (numpy {np.__version__})",
            device_kind=DeviceKind.CPU,
        )

    def __init__(self) -> None:
        self._programs: dict[str, NumpyProgram] = {}

    @property
    def capabilities(self) -> Capabilities:
        return self._CAPS

    def _allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def _release(self, handle: Any) -> None:
        pass  # garbage collected

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle[: data.nbytes] = data.reshape(-1).view(np.uint8)

    def _read(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes].copy()

    def compile(self, kernel: KernelIR) -> NumpyProgram:
        program = self._programs.get(kernel.key)
        if program is None:
            program = self._programs[kernel.key] = compile_numpy(kernel)
        return program

    def launch(self, program: NumpyProgram, output: Buffer, inputs: Sequence[Buffer]) -> None:
        program.run(output.handle, [b.handle for b in inputs])
