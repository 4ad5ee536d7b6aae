"""The cuda backend.

CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities
from spawnml.dtypes import DType
from spawnml.errors import BackendUnavailableError, InvalidInputError
from spawnml.kernel import dump
from spawnml.kernel.cstyle import kernel_name
from spawnml.kernel.ir import KernelIR
from spawnml.kernel.schedule import schedule

from .compiler import DEFAULT_ARCH, compile_ptx, target_arch
from .probe import probe
from .renderer import CUDARenderer
from .runtime import Runtime, runtime

# f16 is stored natively (as 16 bits) and computed in f32; bool is stored as uint8.
CAPABILITIES = Capabilities(
    dtypes=frozenset({
        DType.float32, DType.float16, DType.int8, DType.int16, DType.int32, DType.int64,
        DType.uint8, DType.uint16, DType.uint32, DType.uint64,
    }),
    float16_arithmetic=False,
    max_buffer_bytes=1 << 40,  # the runtime replaces this with the device's memory size
    max_kernel_inputs=500,  # 4 KiB of kernel parameters, 8 bytes per pointer
)
_BLOCK = 256


def _storage_dtype(dt: DType) -> DType:
    """The base class's lowering for CUDA's capabilities, usable without a device."""
    return Backend.storage_dtype(SimpleNamespace(name="cuda", capabilities=CAPABILITIES), dt)  # type: ignore[arg-type]


def render(kernel: KernelIR) -> str:
    """The CUDA C++ source of one specialised kernel."""
    return CUDARenderer(_storage_dtype).render(kernel)


def compile_check(kernel: KernelIR, arch: tuple[int, int] = DEFAULT_ARCH) -> str:
    """Render ``kernel`` and compile it to PTX with NVRTC (no GPU needed).

    Raises KernelCompileError carrying the compiler log when the source does not compile.
    Always compiles (no disk cache): it is a check.
    """
    kernel = schedule(kernel, CUDABackend.max_tile_outputs, CUDABackend.tile_interleave,
                      CUDABackend.tile_inner)
    source = render(kernel)
    dump.write("cuda", kernel, source, "cu")
    return compile_ptx(source, arch, what=f"{kernel.name} ({kernel.source})", cache=False)


@dataclass
class CUDAProgram:
    """A loaded kernel: its module (kept alive), prepared function and grid."""

    module: Any
    function: Any
    name: str
    n_inputs: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    source: str


class CUDABackend(Backend):
    """CUDA C kernels on NVIDIA GPUs through pycuda (NVRTC compile checks without a GPU)."""

    name = "cuda"
    max_tile_outputs = 16

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()

    def __init__(self) -> None:
        info = probe()
        if not info.available:
            raise BackendUnavailableError(f"cuda: {info.reason}")
        self._rt: Runtime = runtime()
        self._arch = target_arch(self._rt.compute_capability)
        self._caps = Capabilities(
            dtypes=CAPABILITIES.dtypes,
            float16_arithmetic=False,
            max_buffer_bytes=int(self._rt.device.total_memory()),
            max_kernel_inputs=CAPABILITIES.max_kernel_inputs,
            extras={"device": info.device, "compute_capability": self._rt.compute_capability,
                    "ptx_arch": self._arch, "float16_storage": True},
        )
        self.renderer = CUDARenderer(self.storage_dtype)
        self._programs: dict[str, CUDAProgram] = {}
        self._in_flight: list[np.ndarray] = []  # host snapshots queued copies still read

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # -- raw memory ---------------------------------------------------------------------
    def _allocate(self, nbytes: int) -> Any:
        return self._rt.cuda.mem_alloc(nbytes)

    def _release(self, handle: Any) -> None:
        handle.free()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        snapshot = data.reshape(-1).view(np.uint8).copy()  # the caller may reuse its array
        self._rt.cuda.memcpy_htod_async(handle, snapshot, self._rt.stream)
        self._in_flight.append(snapshot)

    def _read(self, handle: Any, nbytes: int) -> np.ndarray:
        host = np.empty(nbytes, np.uint8)
        self._rt.cuda.memcpy_dtoh_async(host, handle, self._rt.stream)
        self.synchronize()
        return host

    # -- kernels ------------------------------------------------------------------------
    source_suffix = "cu"

    def build(self, kernel: KernelIR, source: str, renderer: Any) -> CUDAProgram:
        return self.program_from_source(source, kernel_name(kernel), kernel.size,
                                        len(kernel.inputs), what=f"{kernel.name} ({kernel.source})")

    def program_from_source(self, source: str, name: str, size: int, n_inputs: int,
                            what: str = "") -> CUDAProgram:
        """Compile CUDA ``source`` whose kernel ``name`` computes ``size`` elements, and load it."""
        ptx = compile_ptx(source, self._arch, what=what or name)
        module = self._rt.cuda.module_from_buffer(ptx.encode())
        function = module.get_function(name)
        function.prepare("P" * (1 + n_inputs))
        grid = (max(1, -(-size // _BLOCK)), 1, 1)
        return CUDAProgram(module, function, name, n_inputs, grid, (_BLOCK, 1, 1), source)

    def launch(self, program: CUDAProgram, output: Buffer, inputs: Sequence[Buffer]) -> None:
        if len(inputs) != program.n_inputs:
            raise InvalidInputError(
                f"kernel {program.name} takes {program.n_inputs} inputs, got {len(inputs)}"
            )
        program.function.prepared_async_call(
            program.grid, program.block, self._rt.stream,
            int(output.handle), *(int(b.handle) for b in inputs),  # "P" packs integers
        )

    def synchronize(self) -> None:
        self._rt.stream.synchronize()
        self._in_flight.clear()

    def close(self) -> None:
        self.synchronize()
        super().close()
        self._programs.clear()
