"""The CPU backend: host memory buffers and kernels rendered to vectorised numpy."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities, DeviceKind
from spawnml.dtypes import DType
from spawnml.kernel.ir import KernelIR
from spawnml.probing import cpu_model

from .executor import NumpyProgram, NumpyRenderer, chunk


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

    source_suffix = "py"

    def renderer_for(self, kernel: KernelIR) -> NumpyRenderer:
        return NumpyRenderer(self.storage_dtype)

    def build(self, kernel: KernelIR, source: str, renderer: NumpyRenderer) -> NumpyProgram:
        return renderer.program(kernel, source)

    def launch(self, program: NumpyProgram, output: Buffer, inputs: Sequence[Buffer]) -> None:
        program.run(output.handle, [b.handle for b in inputs])

    device_timing = "synchronous"

    def bind(
        self, program: NumpyProgram, output: Buffer, inputs: Sequence[Buffer]
    ) -> Callable[[], None]:
        """The launch with its typed views, chunk grids and output slices made once."""
        k, fn = program.kernel, program.fn
        n = k.output.size
        if n == 0:
            return _nothing
        out, ins = program.views(output.handle, [b.handle for b in inputs])
        shape = k.output.shape
        if not shape:

            def scalar() -> None:
                with np.errstate(all="ignore"):
                    out[0] = fn(out, ins, (), (), ())

            return scalar
        axis, rows = program.axis, program.rows
        chunks = [chunk(out, shape, axis, lead, r0, min(shape[axis], r0 + rows))
                  for lead in itertools.product(*(range(d) for d in shape[:axis]))
                  for r0 in range(0, shape[axis], rows)]  # fmt: skip

        def run() -> None:
            with np.errstate(all="ignore"):
                for grid, ranges, counts, target in chunks:
                    target[...] = fn(out, ins, grid, ranges, counts)

        return run


def _nothing() -> None:
    pass
