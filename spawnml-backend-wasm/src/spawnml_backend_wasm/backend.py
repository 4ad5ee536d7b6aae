"""The wasm backend: WebAssembly (SIMD128) kernels run by wasmtime."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from spawnml import threads
from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities
from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import BackendUnavailableError, InvalidInputError
from spawnml.kernel.analysis import work_estimate
from spawnml.kernel.ir import KernelIR

from .probe import probe
from .wat import WasmRenderer

if TYPE_CHECKING:
    from .runtime import Program

MAX_BYTES = 1 << 32  # the wasm32 address space (65536 pages of 64 KiB)

_NATIVE = frozenset(
    {
        DType.float32,
        DType.int32,
        DType.uint32,
        DType.int64,
        DType.uint64,
        DType.int16,
        DType.uint16,
        DType.int8,
        DType.uint8,
        DType.bool,
    }
)


def plan_modules_enabled() -> bool:
    """``SPAWNML_WASM_PLAN``: 1 (default) links a recorded plan into one module, 0 not."""
    value = os.environ.get("SPAWNML_WASM_PLAN", "1")
    if value not in ("0", "1"):
        raise InvalidInputError(f"SPAWNML_WASM_PLAN must be 0 or 1, got {value!r}")
    return value == "1"


def default_threads() -> int:
    """``SPAWNML_WASM_THREADS`` if set, else the cores this process may run on."""
    return threads.default_threads("SPAWNML_WASM_THREADS")


class WasmBackend(Backend):
    """WebAssembly (SIMD128) kernels run by wasmtime, tensors in one shared linear memory.

    ``threads``: worker threads splitting each launch by output range (default: the cores
    available, or ``SPAWNML_WASM_THREADS``). ``simd``: emit the SIMD128 loop for lane-safe
    kernels (off only to measure what it gains).
    """

    name = "wasm"
    max_tile_outputs = 32
    tile_inner = 8  # 4 x 8 tiles: two f32x4 per row (3x3 conv 14 -> 18, 1x1 16 -> 23 GFLOP/s)
    _CAPS = Capabilities(
        dtypes=_NATIVE,
        float16_arithmetic=False,  # float16 is stored as f32 and rounded to f16 (see lower.py)
        max_buffer_bytes=MAX_BYTES - 65536,
        max_kernel_inputs=1000,
        extras={
            "simd128": True,
            "threads": True,
            "int64": "native i64",
            "address_space": "wasm32 (4 GiB)",
        },
    )

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()

    def __init__(self, threads: int | None = None, simd: bool = True) -> None:
        info = probe()
        if not info.available:
            raise BackendUnavailableError(f"wasm backend unavailable: {info.reason}")
        from .runtime import Runtime  # imports wasmtime: only once a backend is made

        self.runtime = Runtime(threads if threads is not None else default_threads())
        self.renderer = WasmRenderer(storage_dtype=self.storage_dtype)
        self.renderer.simd = simd
        self._programs: dict[str, Program] = {}

    @property
    def threads(self) -> int:
        return self.runtime.threads

    @property
    def capabilities(self) -> Capabilities:
        return self._CAPS

    # -- memory ---------------------------------------------------------------------------
    def _allocate(self, nbytes: int) -> tuple[int, int]:
        return (self.runtime.memory.allocate(nbytes), nbytes)

    def _release(self, handle: tuple[int, int]) -> None:
        self.runtime.memory.release(*handle)

    def _write(self, handle: tuple[int, int], data: np.ndarray) -> None:
        self.runtime.memory.view(handle[0], data.nbytes)[:] = data.reshape(-1).view(np.uint8)

    def _read(self, handle: tuple[int, int], nbytes: int) -> np.ndarray:
        return self.runtime.memory.view(handle[0], nbytes).copy()

    def view(self, buffer: Buffer, shape: Sequence[int], dt: DType | str) -> np.ndarray:
        """A numpy array over the buffer's bytes in linear memory (no copy; writable).

        ``dt`` must be stored natively (see ``storage_dtype``). The view is valid until the
        buffer is freed."""
        dt = as_dtype(dt)
        if self.storage_dtype(dt) is not dt:
            raise InvalidInputError(
                f"wasm stores {dt} as {self.storage_dtype(dt)}; view it as that"
            )
        count = int(np.prod(shape, dtype=np.int64))
        if count * dt.itemsize > buffer.nbytes:
            raise InvalidInputError(
                f"a view of {count} x {dt} exceeds the buffer's {buffer.nbytes} bytes"
            )
        raw = self.runtime.memory.view(buffer.handle[0], count * dt.itemsize)
        return raw.view(dt.numpy).reshape(tuple(shape))

    # -- kernels --------------------------------------------------------------------------
    source_suffix = "wat"

    def build(self, kernel: KernelIR, source: str, renderer: Any) -> Program:
        return self.runtime.program(kernel.key, source, kernel.size, work_estimate(kernel.body))

    def launch(self, program: Program, output: Buffer, inputs: Sequence[Buffer]) -> None:
        addresses = [output.handle[0]] + [b.handle[0] for b in inputs]
        self.runtime.run(program, addresses)

    device_timing = "synchronous"

    def bind(
        self, program: Program, output: Buffer, inputs: Sequence[Buffer]
    ) -> Callable[[], None]:
        return self.runtime.bind(program, [output.handle[0]] + [b.handle[0] for b in inputs])

    def sequence(self, bound: Sequence[Callable[[], None]]) -> Callable[[], None]:
        """Consecutive launches of a recorded plan as one plan module (one call per thread);
        ``SPAWNML_WASM_PLAN=0`` keeps one call per launch."""
        call = self.runtime.sequence(bound) if plan_modules_enabled() else None
        return call if call is not None else super().sequence(bound)

    def close(self) -> None:
        super().close()
        self.runtime.close()

    def __repr__(self) -> str:
        return f"<WasmBackend threads={self.threads} memory={self.runtime.memory.size} bytes>"

    def __getstate__(self) -> Any:  # pragma: no cover - runtimes do not cross processes
        raise TypeError("a WasmBackend cannot be pickled")
