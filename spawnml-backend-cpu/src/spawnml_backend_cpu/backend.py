"""The CPU backend: host memory buffers; kernels compiled to native code through LLVM
(``spawnml_backend_cpu.native``) or rendered to vectorised numpy (``SPAWNML_CPU_JIT=0``)."""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities, DeviceKind
from spawnml.dtypes import DType
from spawnml.errors import BackendUnavailableError, InvalidInputError
from spawnml.kernel.analysis import work_estimate
from spawnml.kernel.ir import KernelIR
from spawnml.kernel.render import Renderer
from spawnml.probing import cpu_model
from spawnml.threads import default_threads

from .executor import NumpyProgram, NumpyRenderer, chunk

_log = logging.getLogger("spawnml.cpu")
SPARE_BYTES = 64
"""Readable bytes after every buffer: a stride-2 vector load of the native code reads one
element past its last lane (``native.llvm_ir``)."""


def jit_enabled() -> bool:
    """``SPAWNML_CPU_JIT``: 1 compiles kernels to native code, 0 runs them as numpy code;
    unset: native code where llvmlite loads (a warning says why where it does not)."""
    value = os.environ.get("SPAWNML_CPU_JIT")
    if value not in (None, "0", "1"):
        raise InvalidInputError(f"SPAWNML_CPU_JIT must be 0 or 1, got {value!r}")
    if value == "0":
        return False
    reason = native_unavailable()
    if reason is None:
        return True
    if value == "1":
        raise BackendUnavailableError(f"cpu: SPAWNML_CPU_JIT=1 but {reason}")
    _log.warning("cpu: kernels run as numpy code (SPAWNML_CPU_JIT=0 to choose it): %s", reason)
    return False


@functools.cache
def native_unavailable() -> str | None:
    """Why native code cannot be compiled here (llvmlite missing or broken), or None."""
    try:
        from .native.jit import host

        host()
    except ImportError as exc:
        return f"llvmlite is not importable ({exc}); pip install llvmlite"
    except Exception as exc:  # noqa: BLE001 - LLVM's own errors: report, run numpy code
        return f"LLVM could not target this CPU: {type(exc).__name__}: {exc}"
    return None


class CPUBackend(Backend):
    """Always available: buffers are numpy byte arrays; kernels run as native code compiled
    by LLVM (``jit``, default ``SPAWNML_CPU_JIT``) or as numpy code.

    ``threads``: threads splitting each native launch by invocation range (default
    ``SPAWNML_CPU_THREADS``, else the cores available) and BLAS inside the kernels that
    call it (``blas_threads``; never at the same time as a native launch). Results depend on
    this count, never on ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``.
    """

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

    def __init__(self, jit: bool | None = None, threads: int | None = None) -> None:
        self._programs: dict[str, Any] = {}
        self.jit = jit_enabled() if jit is None else jit
        self.threads = max(1, threads if threads is not None
                           else default_threads("SPAWNML_CPU_THREADS"))
        if self.jit:
            from .native.jit import host

            # 8 x (one vector) tiles: 512^3 MatMul on one AVX-512 core 66 GFLOP/s at 8 x 16,
            # 48 at 8 x 8, 40 at 4 x 8 (8 vector accumulators of the 32 registers)
            self.vector_width = host().vector_width
            self.tile_inner = self.vector_width
            self.max_tile_outputs = 8 * self.vector_width
            # two vector accumulators per reduction loop: a 50k-element row sum was one
            # chain of dependent adds (InstanceNorm statistics of 32x224x224: 7 ms)
            self.reduction_lanes = 2 * self.vector_width

    @property
    def capabilities(self) -> Capabilities:
        return self._CAPS

    def _allocate(self, nbytes: int) -> np.ndarray:
        """``nbytes`` plus ``SPARE_BYTES`` that native stride-2 vector loads may read past
        the last element (never written, never part of the tensor)."""
        return np.empty(nbytes + SPARE_BYTES, dtype=np.uint8)

    def _release(self, handle: Any) -> None:
        pass  # garbage collected

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle[: data.nbytes] = data.reshape(-1).view(np.uint8)

    def _read(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes].copy()

    def kernel_choice_key(self) -> str | None:
        """With native code, BLAS/numpy kernels and compiled kernels are timed per shape
        (``spawnml.graph.choose``): BLAS wins large convolutions, native code depthwise ones,
        pooling and everything with fused epilogues."""
        if not self.jit:
            return None
        from .native.jit import host

        h = host()
        # not the thread count: processes with other counts (a Ray actor pinned to one core
        # beside its driver) must pick the same kernels, so their results agree to the bit
        return f"{h.cpu} {h.features} {h.code_version}"

    @property
    def source_suffix(self) -> str:  # type: ignore[override]
        return "ll" if self.jit else "py"

    def renderer_for(self, kernel: KernelIR) -> Renderer:
        return self.renderer

    @property
    def renderer(self) -> Renderer:
        """The printer of this backend's kernels: LLVM IR (native code) or numpy source."""
        if self.jit:
            from .native.llvm_ir import LLVMRenderer

            return LLVMRenderer(self.storage_dtype, self.vector_width)
        return NumpyRenderer(self.storage_dtype)

    def build(self, kernel: KernelIR, source: str, renderer: Renderer) -> Any:
        if self.jit:
            from .native.jit import NativeProgram

            return NativeProgram(kernel, source, kernel.size, work_estimate(kernel.body))
        assert isinstance(renderer, NumpyRenderer)
        return renderer.program(kernel, source)

    def launch(self, program: Any, output: Buffer, inputs: Sequence[Buffer]) -> None:
        if isinstance(program, NumpyProgram):
            program.run(output.handle, [b.handle for b in inputs])
        else:
            self._native_call(program, output, inputs)()

    device_timing = "synchronous"

    def _native_call(self, program: Any, output: Buffer, inputs: Sequence[Buffer]
                     ) -> Callable[[], None]:
        """A native program's call over these buffers (their address table made once)."""
        handles = [output.handle, *(b.handle for b in inputs)]
        run = program.bind([h.ctypes.data for h in handles], self.threads)
        run.buffers = handles  # alive while bound
        return run  # type: ignore[no-any-return]

    def bind(self, program: Any, output: Buffer, inputs: Sequence[Buffer]) -> Callable[[], None]:
        """The launch with its arguments prepared once: native programs get their address
        table, numpy programs their typed views, chunk grids and output slices."""
        if not isinstance(program, NumpyProgram):
            return self._native_call(program, output, inputs)
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
