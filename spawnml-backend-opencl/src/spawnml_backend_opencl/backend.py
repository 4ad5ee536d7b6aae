"""The opencl backend.

OpenCL C kernels on any OpenCL device (GPUs, PoCL on CPUs) through pyopencl.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError
from spawnml.kernel.cstyle import kernel_name
from spawnml.kernel.ir import KernelIR

from .probe import describe, probe
from .renderer import OpenCLRenderer
from .runtime import Runtime, build, runtime

# int8/16 and bool (as uchar) are stored natively; uint64/float64 have no kernel type.
_DTYPES = frozenset({
    DType.float32, DType.float16, DType.int8, DType.int16, DType.int32, DType.int64,
    DType.uint8, DType.uint16, DType.uint32, DType.uint64,
})
_WORK_GROUP = 256  # PoCL vectorises across a work-group; GPUs like 64-256 too


@dataclass
class OpenCLProgram:
    """A compiled kernel: its ``cl.Kernel`` (created once) and launch geometry."""

    kernel: Any
    name: str
    n_inputs: int
    global_size: tuple[int]
    local_size: tuple[int]
    source: str


class OpenCLBackend(Backend):
    """OpenCL C kernels on any OpenCL device (GPUs, PoCL on CPUs) through pyopencl."""

    name = "opencl"
    max_tile_outputs = 32  # 8 x 4: eight float4 accumulators (see spawnml.kernel.tile)

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()

    def __init__(self, *, fp16: bool | None = None) -> None:
        """``fp16=False`` computes f16 as f32 even where the device has cl_khr_fp16."""
        self._rt: Runtime = runtime()
        device = self._rt.device
        self._fp16 = self._rt.fp16 if fp16 is None else (fp16 and self._rt.fp16)
        pointer_bytes = device.address_bits // 8
        self._caps = Capabilities(
            dtypes=_DTYPES,
            float16_arithmetic=self._fp16,
            max_buffer_bytes=int(device.max_mem_alloc_size),
            max_kernel_inputs=device.max_parameter_size // pointer_bytes - 1,
            extras={
                "device": describe(device),
                "opencl_c_version": device.opencl_c_version,
                "max_work_group_size": int(device.max_work_group_size),
                # f16 is always stored as half (vload_half/vstore_half are core OpenCL);
                # without cl_khr_fp16 it is computed as f32 and rounded on store and cast.
                "float16_storage": True,
            },
        )
        self.renderer = OpenCLRenderer(self.storage_dtype, fp16=self._fp16)
        self._programs: dict[str, OpenCLProgram] = {}
        self._in_flight: list[np.ndarray] = []  # host arrays queued writes still read

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # -- raw memory ---------------------------------------------------------------------
    def _allocate(self, nbytes: int) -> Any:
        cl = self._rt.cl
        return cl.Buffer(self._rt.context, cl.mem_flags.READ_WRITE, nbytes)

    def _release(self, handle: Any) -> None:
        handle.release()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        # The write is queued, not waited for: it copies from a private snapshot that is
        # kept alive until the queue drains, so the caller may reuse its array at once.
        snapshot = data.reshape(-1).view(np.uint8).copy()
        self._rt.cl.enqueue_copy(self._rt.queue, handle, snapshot, is_blocking=False)
        self._in_flight.append(snapshot)

    def _read(self, handle: Any, nbytes: int) -> np.ndarray:
        host = np.empty(nbytes, np.uint8)
        self._rt.cl.enqueue_copy(self._rt.queue, host, handle, is_blocking=True)
        self._in_flight.clear()  # the in-order queue ran every earlier write
        return host

    # -- kernels ------------------------------------------------------------------------
    source_suffix = "cl"

    def build(self, kernel: KernelIR, source: str, renderer: Any) -> OpenCLProgram:
        return self.program_from_source(source, kernel_name(kernel), kernel.size,
                                        len(kernel.inputs), what=f"{kernel.name} ({kernel.source})")

    def program_from_source(self, source: str, name: str, size: int, n_inputs: int,
                            what: str = "") -> OpenCLProgram:
        """Build OpenCL C ``source`` whose kernel ``name`` computes ``size`` elements."""
        cl = self._rt.cl
        built = build(self._rt, source, what or name)
        kernel = cl.Kernel(built, name)
        limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                           self._rt.device)
        local = min(_WORK_GROUP, int(limit), 1 << max(size - 1, 0).bit_length())
        groups = -(-size // local)
        return OpenCLProgram(kernel, name, n_inputs, (groups * local,), (local,), source)

    def launch(self, program: OpenCLProgram, output: Buffer, inputs: Sequence[Buffer]) -> None:
        if len(inputs) != program.n_inputs:
            raise InvalidInputError(
                f"kernel {program.name} takes {program.n_inputs} inputs, got {len(inputs)}"
            )
        program.kernel.set_args(output.handle, *(b.handle for b in inputs))
        self._rt.cl.enqueue_nd_range_kernel(
            self._rt.queue, program.kernel, program.global_size, program.local_size
        )

    # -- recorded plans: one cl.Kernel per recorded launch, its arguments set once ----------
    device_timing = "events"

    def bind(
        self, program: OpenCLProgram, output: Buffer, inputs: Sequence[Buffer]
    ) -> Callable[[], Any]:
        if len(inputs) != program.n_inputs:
            raise InvalidInputError(
                f"kernel {program.name} takes {program.n_inputs} inputs, got {len(inputs)}"
            )
        cl = self._rt.cl
        kernel = cl.Kernel(program.kernel.program, program.kernel.function_name)
        kernel.set_args(output.handle, *(b.handle for b in inputs))
        # The binding's own enqueue (pyopencl's wrapper adds ~1 us of argument handling).
        enqueue = cl._cl.enqueue_nd_range_kernel
        sizes = (program.global_size, program.local_size)
        bound = functools.partial(enqueue, self._rt.queue, kernel, *sizes)

        def profiled() -> float:
            event = enqueue(self._profiling_queue(), kernel, *sizes)
            event.wait()
            return (event.profile.end - event.profile.start) * 1e-9

        bound.profiled = profiled  # type: ignore[attr-defined]
        return bound

    def _profiling_queue(self) -> Any:
        """A second in-order queue with profiling events, used only by profiles (the main
        queue is finished before each launch it runs)."""
        queue = self.__dict__.get("_profile_queue")
        if queue is None:
            cl = self._rt.cl
            queue = self.__dict__["_profile_queue"] = cl.CommandQueue(
                self._rt.context, self._rt.device,
                properties=cl.command_queue_properties.PROFILING_ENABLE,
            )  # fmt: skip
        return queue

    def synchronize(self) -> None:
        self._rt.queue.finish()
        self._in_flight.clear()

    def close(self) -> None:
        self.synchronize()
        super().close()
        self._programs.clear()
