"""The backend contract: what every execution target implements.

A backend class is registered by a plugin. ``probe()`` is a cheap class-level check that
never raises; constructing the class creates the runtime (context, device, queues) and
raises :class:`BackendUnavailableError` when that is impossible.
"""

from __future__ import annotations

import abc
import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .dtypes import DType, dtype as as_dtype
from .errors import InvalidInputError, KernelCompileError, OutOfMemoryError
from .memory import BufferPool
from .storage import from_storage, lowered_storage, to_storage

if TYPE_CHECKING:
    from .kernel.ir import KernelIR
    from .kernel.render import Renderer


class DeviceKind(enum.Enum):
    """What kind of device a backend found; decides the default preference order."""

    GPU = "gpu"  # a real hardware accelerator
    CPU = "cpu"  # the host CPU run natively (the cpu backend)
    EMULATED = "emulated"  # a CPU or software implementation behind a GPU-style API
    NONE = "none"  # nothing found


@dataclass(frozen=True)
class BackendInfo:
    """What a probe found: availability, the reason when unavailable, the device."""

    name: str
    available: bool
    reason: str = ""
    device: str = ""
    device_kind: DeviceKind = DeviceKind.NONE
    plugin: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "available": self.available,
            "device": self.device,
            "device_kind": self.device_kind.value,
            "reason": self.reason,
            "plugin": self.plugin,
        }


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports; tests and the planner read these instead of guessing."""

    dtypes: frozenset[DType]
    """Element types stored natively. Others are lowered (see ``storage_dtype``)."""
    float16_arithmetic: bool = False
    """Whether float16 is computed natively (otherwise f32 math, rounded to f16 on store)."""
    max_buffer_bytes: int = 1 << 31
    max_kernel_inputs: int = 64
    extras: dict[str, Any] = field(default_factory=dict)


class Buffer:
    """A backend allocation. ``handle`` is the backend's native object."""

    __slots__ = ("backend", "handle", "nbytes", "size_class", "freed")

    def __init__(self, backend: Backend, handle: Any, nbytes: int, size_class: int) -> None:
        self.backend = backend
        self.handle = handle
        self.nbytes = nbytes
        self.size_class = size_class
        self.freed = False

    def __repr__(self) -> str:
        return f"<Buffer {self.backend.name} {self.nbytes} bytes>"


def program_cache_limit(default: int) -> int:
    """How many compiled programs (or modules, instances) a cache keeps: the environment's
    ``SPAWNML_MAX_PROGRAMS``, else ``default``; at least 1."""
    return max(1, int(os.environ.get("SPAWNML_MAX_PROGRAMS", default)))


def trim_lru(cache: dict[Any, Any], limit: int) -> None:
    """Drop the oldest entries of an insertion-ordered ``cache`` beyond ``limit`` (callers
    re-insert an entry on each use, so the oldest is the least recently used)."""
    while len(cache) > limit:
        del cache[next(iter(cache))]


class Backend(abc.ABC):
    """An execution target. Subclasses implement the raw memory and kernel operations."""

    name: ClassVar[str]

    # -- discovery ----------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def probe(cls) -> BackendInfo:
        """Check the runtime and device cheaply. Never raises."""

    # -- description --------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @property
    def info(self) -> BackendInfo:
        return type(self).probe()

    # -- raw memory (implemented by each backend) ---------------------------------------
    @abc.abstractmethod
    def _allocate(self, nbytes: int) -> Any:
        """A new native buffer of ``nbytes``."""

    @abc.abstractmethod
    def _release(self, handle: Any) -> None:
        """Release a native buffer."""

    @abc.abstractmethod
    def _write(self, handle: Any, data: np.ndarray) -> None:
        """Copy a contiguous host array into the start of a native buffer."""

    @abc.abstractmethod
    def _read(self, handle: Any, nbytes: int) -> np.ndarray:
        """The first ``nbytes`` of a native buffer as a uint8 host array (waits for work)."""

    # -- kernels --------------------------------------------------------------------------
    source_suffix: ClassVar[str] = "txt"
    """The suffix of this backend's kernel sources in ``SPAWNML_DUMP_KERNELS``."""

    max_cached_programs: ClassVar[int] = 64
    """Programs ``compile`` keeps for reuse, least recently used dropped first (the
    environment's ``SPAWNML_MAX_PROGRAMS`` wins). Plans hold their own programs: a dropped
    one lives on while a plan uses it, and is only compiled again for a new plan."""

    def compile(self, kernel: KernelIR) -> Any:
        """Compile a specialised kernel into a program, once per specialisation: cache ->
        limit checks -> render (the core passes, then the target's printer) -> dump ->
        ``build``. A backend supplies ``renderer_for`` and ``build``."""
        cache: dict[str, Any] = self.__dict__.setdefault("_programs", {})
        key = kernel.key or kernel.fingerprint()
        program = cache.pop(key, None)  # re-inserted last: dicts keep insertion order
        if program is None:
            program = self._compile_new(kernel)
        cache[key] = program
        trim_lru(cache, program_cache_limit(self.max_cached_programs))
        return program

    def _compile_new(self, kernel: KernelIR) -> Any:
        from .kernel.tune import tune, tuning_enabled

        if tuning_enabled() and self.max_tile_outputs > 1:
            return tune(self, kernel)
        scheduled = self.schedule(kernel)
        try:
            self.check_limits(scheduled)
        except KernelCompileError:
            if not scheduled.tile:
                raise
            # a register tile multiplies the loops of copies that cannot share them:
            # one output per invocation may still fit the device's limits
            from .kernel.schedule import schedule

            scheduled = schedule(kernel)
            self.check_limits(scheduled)
        return self.build_program(scheduled)

    def build_program(self, scheduled: KernelIR) -> Any:
        """Render a scheduled kernel (the core passes, then the target's printer), dump it
        (``SPAWNML_DUMP_KERNELS``) and ``build`` it."""
        from .kernel import dump

        renderer = self.renderer_for(scheduled)
        source = renderer.render(scheduled)
        dump.write(self.name, scheduled, source, self.source_suffix)
        return self.build(scheduled, source, renderer)

    max_tile_outputs: ClassVar[int] = 1
    """Outputs one invocation may compute (a register tile, ``spawnml.kernel.tile``); 1: none."""
    tile_inner: ClassVar[int] = 4
    """Outputs along a register tile's innermost axis (a multiple of the target's vector
    width: Wasm takes 8, two SIMD128 vectors, within a budget of 32)."""
    tile_interleave: ClassVar[bool] = False
    """Lay a tile's innermost axis out across invocations (``tile_kernel(interleave=True)``).
    Measured on PoCL and lavapipe: no faster than blocks (512³ MatMul 6.1 vs 7.5 GFLOP/s)."""

    reduction_lanes: ClassVar[int] = 1
    """Partial results a float reduction loop keeps (``spawnml.kernel.partial_sums``): a
    target with vectors but no parallel invocations to hide add latency (the cpu) asks for
    two vectors' worth; 1: every sum in order."""

    def schedule(self, kernel: KernelIR) -> KernelIR:
        """``kernel`` as this target runs it (``spawnml.kernel.schedule``): with the register
        tile that buys reuse within ``max_tile_outputs`` (``SPAWNML_TILE=0``: never), then
        the index tests its value ranges decide folded away."""
        from .kernel.schedule import schedule

        return schedule(kernel, self.max_tile_outputs, self.tile_interleave, self.tile_inner,
                        self.vector_loads_pay, self.reduction_lanes)

    def vector_loads_pay(self, tiled: KernelIR) -> bool:
        """Whether this target's renderer turns the copies of ``tiled`` (a tile along the
        innermost axis that buys no reuse) into vectors that read inputs with vector loads
        (``spawnml.kernel.vectorize``): only then is such a tile worth its code."""
        from .kernel.vectorize import reads_vectors, vector_width, vectorize

        renderer = self.renderer_for(tiled)
        traits = renderer.traits
        width = vector_width(traits.vector_width)
        if width < 2:
            return False
        lowered = renderer.lower(tiled)
        out = vectorize(lowered, width, renderer.storage_dtype, traits.strided_vector_loads,
                        traits.vector_calls)
        return reads_vectors(out)

    def kernel_choice_key(self) -> str | None:
        """None (the default): a backend kernel that supports a node always runs it. A
        string (what timings on this backend depend on: device, threads, compiler): each
        node with a backend kernel is timed against its portable lowering on its shapes and
        runs the faster (``spawnml.graph.choose``)."""
        return None

    def check_limits(self, kernel: KernelIR) -> None:
        """Refuse (KernelCompileError) a kernel this device provably cannot run correctly."""
        from .kernel.analysis import check_loop_limit

        check_loop_limit(self.name, kernel, self.capabilities.extras.get("max_loop_iterations"))

    def renderer_for(self, kernel: KernelIR) -> Renderer:
        """The renderer of ``kernel`` (``self.renderer`` unless a backend configures one per
        kernel, e.g. with its binding layout)."""
        return self.renderer  # type: ignore[attr-defined, no-any-return]

    def build(self, kernel: KernelIR, source: str, renderer: Renderer) -> Any:
        """A program from rendered ``source``: the target's compiler and loader."""
        raise NotImplementedError(f"{self.name}: build (or override compile)")

    @abc.abstractmethod
    def launch(self, program: Any, output: Buffer, inputs: Sequence[Buffer]) -> None:
        """Queue one launch computing every element of ``output``."""

    def synchronize(self) -> None:  # noqa: B027 - a no-op for backends that run synchronously
        """Wait until all queued work has finished."""

    # -- recorded plans (graph.record) -------------------------------------------------------
    device_timing: ClassVar[str] = "synchronize"
    """How ``profile_launch`` measures device time: "events"/"timestamps" (measured by the
    device), "synchronous" (launches run on the calling thread: the call's time), or
    "synchronize" (not measured: the profiler times each launch with ``synchronize``)."""

    def bind(self, program: Any, output: Buffer, inputs: Sequence[Buffer]) -> Callable[[], None]:
        """A callable that queues this launch with these buffers, called once per replay of
        a recorded plan. Backends override it to prepare arguments once (kernel arguments,
        bind groups, uniforms); the default calls ``launch``."""
        launch, ins = self.launch, tuple(inputs)

        def bound() -> None:
            launch(program, output, ins)

        return bound

    def sequence(self, bound: Sequence[Callable[[], None]]) -> Callable[[], None]:
        """One callable running consecutive ``bind`` results of this backend in order (a
        backend may encode them together, e.g. one compute pass)."""
        calls = tuple(bound)
        if len(calls) == 1:
            return calls[0]

        def run() -> None:
            for call in calls:
                call()

        return run

    def profile_launch(
        self, program: Any, output: Buffer, inputs: Sequence[Buffer]
    ) -> float | None:
        """Run one launch now and return its device time in seconds as the device measured
        it, or None where this backend cannot (the caller then times it with
        ``synchronize``)."""
        return None

    def close(self) -> None:
        """Release the runtime's cached resources."""
        self.pool.trim()

    # -- memory through the pool ----------------------------------------------------------
    @property
    def pool(self) -> BufferPool[Any]:
        pool = self.__dict__.get("_pool")
        if pool is None:
            pool = self.__dict__["_pool"] = BufferPool(self._allocate, self._release)
        return pool

    def alloc(self, nbytes: int, prefer: Any = None) -> Buffer:
        """A buffer of at least ``nbytes`` (contents undefined); ``prefer``: a handle to
        reuse if it is free in the pool (see ``BufferPool.acquire``)."""
        limit = self.capabilities.max_buffer_bytes
        if nbytes > limit:
            raise OutOfMemoryError(
                f"{self.name}: a buffer of {nbytes} bytes exceeds this device's limit of "
                f"{limit} bytes"
            )
        handle, cls = self.pool.acquire(nbytes, prefer)
        return Buffer(self, handle, nbytes, cls)

    def free(self, buffer: Buffer) -> None:
        """Return a buffer to the pool; double frees are ignored."""
        if buffer.freed:
            return
        buffer.freed = True
        self.pool.give_back(buffer.handle, buffer.size_class)

    # -- typed transfers ------------------------------------------------------------------
    def storage_dtype(self, dt: DType) -> DType:
        """The element type this backend stores ``dt`` as (lowering what it lacks). String
        tensors are never stored on a device: HostOnly places their ops on the host."""
        if dt.is_string:
            from .op import HostOnly  # lazily: op imports the kernel language, which imports us

            raise HostOnly(f"backend {self.name!r} stores no string tensors: ops on strings "
                           "run on the host")
        storage = lowered_storage(dt, self.capabilities.dtypes)
        if storage is not None:
            return storage
        raise InvalidInputError(f"backend {self.name!r} cannot store dtype {dt}")

    def upload(self, array: np.ndarray, buffer: Buffer | None = None) -> Buffer:
        """Copy a host array to the device (lowered to the storage dtype)."""
        array = np.asarray(array)
        storage = self.storage_dtype(as_dtype(array.dtype))
        if storage.numpy != array.dtype:
            array = to_storage(array, storage, self.name)
        data = np.ascontiguousarray(array)
        if buffer is None:
            buffer = self.alloc(data.nbytes)
        elif buffer.nbytes < data.nbytes:
            raise InvalidInputError(
                f"upload of {data.nbytes} bytes into a buffer of {buffer.nbytes} bytes"
            )
        if data.nbytes:
            self._write(buffer.handle, data)
        return buffer

    def read_bytes(self, buffer: Buffer) -> bytes:
        """The buffer's stored bytes, as the device holds them (exporters)."""
        return self._read(buffer.handle, buffer.nbytes).tobytes() if buffer.nbytes else b""

    def write_bytes(self, buffer: Buffer, data: bytes) -> None:
        """Store raw bytes (as ``read_bytes`` returned them) at the start of ``buffer``."""
        if len(data) > buffer.nbytes:
            raise InvalidInputError(f"{len(data)} bytes into a buffer of {buffer.nbytes} bytes")
        if data:
            self._write(buffer.handle, np.frombuffer(data, np.uint8))

    def download(self, buffer: Buffer, shape: Sequence[int], dt: DType | str) -> np.ndarray:
        """Copy a buffer to a new host array of ``shape`` and logical dtype ``dt``."""
        dt = as_dtype(dt)
        storage = self.storage_dtype(dt)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * storage.itemsize
        if nbytes > buffer.nbytes:
            raise InvalidInputError(
                f"download of {nbytes} bytes from a buffer of {buffer.nbytes} bytes"
            )
        raw = self._read(buffer.handle, nbytes) if nbytes else np.zeros(0, np.uint8)
        host = raw.view(storage.numpy).reshape(tuple(shape))
        if storage is not dt:
            host = from_storage(host, storage, dt)
        return host
