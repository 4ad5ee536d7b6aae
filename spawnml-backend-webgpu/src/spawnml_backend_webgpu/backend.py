"""The webgpu backend: WGSL compute shaders on a WebGPU adapter through wgpu-py.

Launches are recorded into one open command encoder and submitted together; the host waits
only when it reads a buffer (or calls ``synchronize``). ``queue.write_buffer`` runs at its
place on the queue timeline, so every write first submits the open batch it must follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spawnml.backend import (
    Backend,
    BackendInfo,
    Buffer,
    Capabilities,
    program_cache_limit,
    trim_lru,
)
from spawnml.dtypes import DType
from spawnml.errors import BackendError, InvalidInputError, KernelCompileError
from spawnml.kernel.ir import KernelIR

from .device import DeviceContext, context_for, shared_context
from .layout import Binding, Layout, plan
from .probe import probe
from .renderer import WGSLRenderer

MAX_BATCH = 512  # launches per submission; bounds what one submit holds alive
WEB_LIMITS = {  # the WebGPU specification's defaults: every browser's device grants them
    "max-storage-buffers-per-shader-stage": 8,
    "max-storage-buffer-binding-size": 134217728,
    "max-buffer-size": 268435456,
    "max-compute-workgroups-per-dimension": 65535,
}


@dataclass(frozen=True)
class Program:
    """A compiled kernel: its pipeline, binding layout and dispatch grid."""

    name: str
    pipeline: Any
    bind_group_layout: Any
    layout: Layout
    n_inputs: int
    source: str
    key: str = ""  # the specialisation's key (one program per key on a backend)


class WebGPUBackend(Backend):
    """WGSL compute shaders on a WebGPU adapter through wgpu-py."""

    name = "webgpu"
    max_tile_outputs = 16

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()

    def __init__(
        self,
        device: Any = None,
        *,
        power_preference: str = "high-performance",
        native_f16: bool | None = None,
        limits: Mapping[str, int] | None = None,
        portable: bool = False,
    ) -> None:
        """Compute on ``device`` (a ``wgpu.GPUDevice`` the application made) or on the
        process-wide device; ``native_f16=False`` stores float16 as f32 even where the
        adapter offers shader-f16; ``limits`` (WebGPU limit names, e.g.
        ``max-storage-buffers-per-shader-stage``) lowers the device's own for planning
        kernels; ``portable=True`` plans for any WebGPU device (``export-web``): within
        ``WEB_LIMITS`` (what every browser grants), without shader-f16 and without this
        device's own workarounds (lavapipe's loop limit), so its results here may differ."""
        import wgpu

        self._wgpu = wgpu
        self.ctx: DeviceContext = context_for(device) if device is not None else shared_context(
            power_preference
        )
        if portable:
            native_f16, limits = False, {**WEB_LIMITS, **(limits or {})}
        self.native_f16 = self.ctx.f16 if native_f16 is None else (native_f16 and self.ctx.f16)
        self.limits = {k: int(v) for k, v in self.ctx.limits.items()}
        for name, value in (limits or {}).items():
            if name not in self.limits:
                raise InvalidInputError(f"webgpu: unknown limit {name!r} (known: "
                                        f"{sorted(self.limits)})")
            self.limits[name] = min(self.limits[name], int(value))
        limits = self.limits
        self.max_binding = int(limits["max-storage-buffer-binding-size"])
        dtypes = {DType.float32, DType.int32, DType.uint32}
        if self.native_f16:
            dtypes.add(DType.float16)
        self._caps = Capabilities(
            dtypes=frozenset(dtypes),
            float16_arithmetic=self.native_f16,
            max_buffer_bytes=min(int(limits["max-buffer-size"]), self.max_binding),
            max_kernel_inputs=1 << 16,  # beyond the per-stage limit inputs are packed
            extras={
                "adapter": self.ctx.adapter_summary,
                "max_storage_buffers_per_shader_stage":
                    int(limits["max-storage-buffers-per-shader-stage"]),
                "max_compute_workgroups_per_dimension":
                    int(limits["max-compute-workgroups-per-dimension"]),
                "shader_f16": self.ctx.f16,
                # Mesa's lavapipe silently ends shaders after 65535 loop iterations.
                "max_loop_iterations": 65535 if "llvmpipe" in self.ctx.adapter_summary
                and not portable else None,
            },
        )
        self._programs: dict[str, Program] = {}

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # ------------------------------------------------------------------ raw memory
    def _allocate(self, nbytes: int) -> Any:
        usage = self._wgpu.BufferUsage
        return self.ctx.device.create_buffer(
            size=nbytes, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        )

    def _release(self, handle: Any) -> None:
        with self.ctx.lock:
            if self.ctx.encoder is not None:  # still referenced by the open batch
                self.ctx.keep_alive.append(handle)
            else:
                handle.destroy()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        raw = data.reshape(-1).view(np.uint8)
        if raw.nbytes % 4:  # WebGPU writes whole 4-byte words
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        with self.ctx.lock:
            self._submit()
            self.ctx.device.queue.write_buffer(handle, 0, raw)

    def _read(self, handle: Any, nbytes: int) -> np.ndarray:
        with self.ctx.lock:
            self._submit()
            size = -(-nbytes // 4) * 4
            view = self.ctx.device.queue.read_buffer(handle, 0, size)
        return np.frombuffer(view, np.uint8, count=nbytes).copy()

    # ------------------------------------------------------------------ kernels
    def renderer(self, layout: Layout) -> WGSLRenderer:
        return WGSLRenderer(self.storage_dtype, layout, f16_arithmetic=self.native_f16)

    source_suffix = "wgsl"

    def renderer_for(self, kernel: KernelIR) -> WGSLRenderer:
        limits = self.limits
        layout = plan(
            kernel,
            self.storage_dtype,
            int(limits["max-storage-buffers-per-shader-stage"]),
            int(limits["max-compute-workgroups-per-dimension"]),
        )
        for binding in layout.inputs:
            self._check_binding(kernel.name, binding.nbytes)
        return self.renderer(layout)

    def build(self, kernel: KernelIR, source: str, renderer: WGSLRenderer) -> Program:
        layout = renderer.layout
        # Pipelines are shared by every backend on the device (same source, same layout).
        cache_key = f"{kernel.key}/{self.native_f16}/{len(layout.inputs)}"
        with self.ctx.lock:  # a bounded LRU, as the backends' program caches
            cached = self.ctx.pipelines.pop(cache_key, None)
            if cached is None:
                cached = self._pipeline(kernel, layout, source)
            self.ctx.pipelines[cache_key] = cached
            trim_lru(self.ctx.pipelines, program_cache_limit(self.max_cached_programs))
        return Program(kernel.name, *cached, layout, len(kernel.inputs), source, kernel.key)

    def _pipeline(self, kernel: KernelIR, layout: Layout, source: str) -> tuple[Any, Any]:
        wgpu = self._wgpu
        device = self.ctx.device
        entries = [
            {"binding": n, "visibility": wgpu.ShaderStage.COMPUTE,
             "buffer": {"type": wgpu.BufferBindingType.read_only_storage}}
            for n in range(len(layout.inputs))
        ]
        entries.append({"binding": len(layout.inputs), "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": wgpu.BufferBindingType.storage}})
        try:
            module = device.create_shader_module(code=source, label=kernel.key)
            bgl = device.create_bind_group_layout(entries=entries)
            pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[bgl]),
                compute={"module": module, "entry_point": "main"},
                label=kernel.key,
            )
        except wgpu.GPUError as exc:
            raise KernelCompileError(
                f"webgpu: kernel {kernel.name} ({kernel.source}) did not compile:\n{exc}\n"
                f"--- WGSL ---\n{source}"
            ) from None
        return pipeline, bgl

    def _check_binding(self, what: str, nbytes: int) -> None:
        if nbytes > self.max_binding:
            raise BackendError(
                f"webgpu: {what} binds {nbytes} bytes, above this device's "
                f"maxStorageBufferBindingSize of {self.max_binding} bytes"
            )

    def launch(self, program: Program, output: Buffer, inputs: Sequence[Buffer]) -> None:
        if len(inputs) != program.n_inputs:
            raise InvalidInputError(
                f"webgpu: kernel {program.name} takes {program.n_inputs} inputs, got {len(inputs)}"
            )
        with self.ctx.lock:
            encoder = self._encoder()
            scratch: list[tuple[Any, int]] = []
            resources = [
                self._input_resource(encoder, binding, inputs, output, scratch)
                for binding in program.layout.inputs
            ]
            resources.append(output.handle)
            bind_group = self._bind_group(program, resources)
            cpass = encoder.begin_compute_pass()
            cpass.set_pipeline(program.pipeline)
            cpass.set_bind_group(0, bind_group)
            cpass.dispatch_workgroups(*program.layout.grid)
            cpass.end()
            # Scratch goes back to the pool now: its next use is ordered after this batch.
            for handle, size_class in scratch:
                self.pool.give_back(handle, size_class)
            self.ctx.launches += 1
            if self.ctx.launches >= MAX_BATCH:
                self._submit()

    def _bind_group(self, program: Program, resources: Sequence[Any]) -> Any:
        """A bind group of ``resources`` (the inputs, then the output) for ``program``."""
        return self.ctx.device.create_bind_group(
            layout=program.bind_group_layout,
            entries=[
                {"binding": n, "resource": {"buffer": buf, "offset": 0,
                                            "size": min(buf.size, self.max_binding)}}
                for n, buf in enumerate(resources)
            ],
        )  # fmt: skip

    def _input_resource(
        self,
        encoder: Any,
        binding: Binding,
        inputs: Sequence[Buffer],
        output: Buffer,
        scratch: list[tuple[Any, int]],
    ) -> Any:
        """The buffer bound for one input binding: the input itself, or a scratch copy when
        inputs are packed or the input is the output buffer (WebGPU forbids that aliasing)."""
        if not binding.packed:
            handle = inputs[binding.members[0].input].handle
            if handle is not output.handle:
                return handle
        handle, size_class = self.pool.acquire(max(binding.nbytes, 4))
        scratch.append((handle, size_class))
        for m in binding.members:
            if m.copy_bytes:
                encoder.copy_buffer_to_buffer(
                    inputs[m.input].handle, 0, handle, m.byte_offset, m.copy_bytes
                )
        return handle

    # ------------------------------------------------------------------ recorded plans
    def bind(
        self, program: Program, output: Buffer, inputs: Sequence[Buffer]
    ) -> Callable[[], None]:
        """The bind group made once; consecutive bound dispatches are encoded in one compute
        pass (``sequence``). Launches needing scratch copies (packed inputs, an input that is
        the output) keep the per-launch path."""
        if len(inputs) != program.n_inputs:
            raise InvalidInputError(
                f"webgpu: kernel {program.name} takes {program.n_inputs} inputs, got {len(inputs)}"
            )
        resources = []
        for binding in program.layout.inputs:
            handle = inputs[binding.members[0].input].handle
            if binding.packed or handle is output.handle:
                return super().bind(program, output, inputs)
            resources.append(handle)
        resources.append(output.handle)
        with self.ctx.lock:
            group = self._bind_group(program, resources)
        return _Dispatches(self, [(program.pipeline, group, tuple(program.layout.grid))])

    @property
    def device_timing(self) -> str:  # type: ignore[override]
        return "timestamps" if "timestamp-query" in self.ctx.device.features else "synchronize"

    def _timestamps(self) -> tuple[Any, Any]:
        """A query set of two timestamps and the buffer it resolves into (profiles)."""
        found = self.__dict__.get("_timestamp_query")
        if found is None:
            usage = self._wgpu.BufferUsage
            device = self.ctx.device
            found = self.__dict__["_timestamp_query"] = (
                device.create_query_set(type=self._wgpu.QueryType.timestamp, count=2),
                device.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC),
            )
        return found

    def sequence(self, bound: Sequence[Callable[[], None]]) -> Callable[[], None]:
        parts: list[Callable[[], None]] = []
        for call in bound:
            if isinstance(call, _Dispatches) and parts and isinstance(parts[-1], _Dispatches):
                parts[-1] = _Dispatches(self, [*parts[-1].items, *call.items])
            else:
                parts.append(call)
        return super().sequence(parts)

    # ------------------------------------------------------------------ batching
    def _encoder(self) -> Any:
        if self.ctx.encoder is None:
            self.ctx.encoder = self.ctx.device.create_command_encoder()
        return self.ctx.encoder

    def _submit(self) -> None:
        """Submit the open batch without waiting for it."""
        ctx = self.ctx
        if ctx.encoder is not None:
            ctx.device.queue.submit([ctx.encoder.finish()])
            ctx.encoder, ctx.launches = None, 0
        for handle in ctx.keep_alive:  # destroying after submit is safe in WebGPU
            handle.destroy()
        ctx.keep_alive.clear()

    def synchronize(self) -> None:
        with self.ctx.lock:
            self._submit()
            # wgpu-py 0.32's on_submitted_work_done_sync() fails with a ctypes signature
            # mismatch (TypeError) against its wgpu-native. A read of a 4-byte buffer waits
            # too: its copy is queued after, so finishes after, all submitted work.
            if self.ctx.fence is None:
                self.ctx.fence = self._allocate(4)
            self.ctx.device.queue.read_buffer(self.ctx.fence, 0, 4)

    def close(self) -> None:
        self.synchronize()
        super().close()


_NATIVE: list[Any] = []  # (ffi, libf) of wgpu-native, or None; loaded on first use


def _native() -> Any:
    """wgpu-py's native calls, without the per-call argument handling of its methods
    (imported lazily: loading the plugin must not load wgpu)."""
    if not _NATIVE:
        try:
            from wgpu.backends.wgpu_native._api import ffi, libf

            _NATIVE.append((ffi, libf))
        except ImportError:  # pragma: no cover - another wgpu-py backend or layout
            _NATIVE.append(None)
    return _NATIVE[0]


class _Dispatches:
    """Bound dispatches (pipeline, bind group, grid) encoded into one compute pass of the
    open batch; a pipeline set once for a run of dispatches that share it."""

    __slots__ = ("backend", "items", "__dict__")

    def __init__(self, backend: WebGPUBackend, items: list[tuple[Any, Any, tuple]]) -> None:
        self.backend = backend
        self.items = items

    def __call__(self) -> None:
        backend = self.backend
        ctx = backend.ctx
        with ctx.lock:
            cpass = backend._encoder().begin_compute_pass()
            last = None
            native = _native()
            if native is not None:
                ffi, libf = native
                raw = cpass._internal
                set_pipeline = libf.wgpuComputePassEncoderSetPipeline
                set_group = libf.wgpuComputePassEncoderSetBindGroup
                dispatch = libf.wgpuComputePassEncoderDispatchWorkgroups
                null = ffi.NULL
                for pipeline, group, (x, y, z) in self.items:
                    if pipeline is not last:
                        set_pipeline(raw, pipeline._internal)
                        last = pipeline
                    set_group(raw, 0, group._internal, 0, null)
                    dispatch(raw, x, y, z)
            else:
                for pipeline, group, grid in self.items:
                    if pipeline is not last:
                        cpass.set_pipeline(pipeline)
                        last = pipeline
                    cpass.set_bind_group(0, group)
                    cpass.dispatch_workgroups(*grid)
            cpass.end()
            ctx.launches += len(self.items)
            if ctx.launches >= MAX_BATCH:
                backend._submit()

    def profiled(self) -> float | None:
        """Run the dispatches alone in a pass with timestamp writes; the device time
        between the pass's start and end, in seconds (None without timestamp-query)."""
        backend = self.backend
        if backend.device_timing != "timestamps":
            self()
            backend.synchronize()
            return None
        ctx, (queries, resolved) = backend.ctx, backend._timestamps()
        with ctx.lock:
            backend._submit()
            encoder = ctx.device.create_command_encoder()
            cpass = encoder.begin_compute_pass(timestamp_writes={
                "query_set": queries, "beginning_of_pass_write_index": 0,
                "end_of_pass_write_index": 1,
            })  # fmt: skip
            for pipeline, group, grid in self.items:
                cpass.set_pipeline(pipeline)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(*grid)
            cpass.end()
            encoder.resolve_query_set(queries, 0, 2, resolved, 0)
            ctx.device.queue.submit([encoder.finish()])
            stamps = np.frombuffer(ctx.device.queue.read_buffer(resolved, 0, 16), np.uint64)
        return float(stamps[1] - stamps[0]) * 1e-9  # nanoseconds (WebGPU's unit)
