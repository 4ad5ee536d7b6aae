"""The Backend contract, implemented in host memory: buffers are numpy byte arrays and a
compiled program is an :class:`~spawnml_backend_example.interpreter.Program`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities, DeviceKind
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError
from spawnml.kernel.ir import KernelIR

from .interpreter import Program


class ExampleBackend(Backend):
    """Always available; slow but exact enough to pass the conformance suite."""

    name = "example"
    # float64 is not listed: the base class then stores it as float32 (kernels compute
    # float64 as f32 anyway); nor is uint64, which it stores lowered too.
    _CAPS = Capabilities(
        dtypes=frozenset({
            DType.float32, DType.float16, DType.int8, DType.int16, DType.int32, DType.int64,
            DType.uint8, DType.uint16, DType.uint32, DType.bool,
        }),
        float16_arithmetic=False,  # f16 is computed in f32 and rounded on store
        max_buffer_bytes=1 << 32,
        max_kernel_inputs=1 << 10,
    )

    @classmethod
    def probe(cls) -> BackendInfo:
        # Cheap and never raises: a real backend would look for its driver here.
        return BackendInfo(cls.name, True, device=f"numpy {np.__version__} tree walker",
                           device_kind=DeviceKind.EMULATED)

    def __init__(self) -> None:
        self._programs: dict[str, Program] = {}

    @property
    def capabilities(self) -> Capabilities:
        return self._CAPS

    def storage_dtype(self, dtype: DType) -> DType:
        # bfloat16 would be stored as its 16 bits in uint16 words that kernels widen with
        # shifts and bitcasts; this interpreter gets those wrong (bf16 Add gives garbage), so
        # it refuses bfloat16, and conformance skips those cases, until it is fixed.
        if dtype == DType.bfloat16:
            raise InvalidInputError(f"backend {self.name!r} cannot store dtype {dtype.value}")
        return super().storage_dtype(dtype)

    # -- raw memory: the base class adds pooling, dtype lowering and checks ----------------
    def _allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def _release(self, handle: Any) -> None:
        pass  # garbage collected

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle[: data.nbytes] = data.reshape(-1).view(np.uint8)

    def _read(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes].copy()

    # -- kernels ----------------------------------------------------------------------------
    def compile(self, kernel: KernelIR) -> Program:
        """A program per specialisation, cached by the IR's key."""
        key = kernel.key or kernel.fingerprint()
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = Program(kernel, self.storage_dtype)
        return program

    def launch(self, program: Program, output: Buffer, inputs: Sequence[Buffer]) -> None:
        program.run(output.handle, [b.handle for b in inputs])
