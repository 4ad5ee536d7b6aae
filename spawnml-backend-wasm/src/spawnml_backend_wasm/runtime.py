"""Compiling WAT modules (cached in memory and on disk) and running them on worker threads.

One engine, configured for threads and shared memory. Compiled modules are kept in memory and
serialized to spawnml's kernel disk cache (``spawnml.kernel.disk_cache``), keyed by the WAT
text and the wasmtime version, so a new process skips Cranelift. Each thread that runs kernels
has its own Store and one Instance per module, all importing the same shared memory; wasmtime calls
release the GIL, so threads computing disjoint output ranges run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any

import numpy as np
import wasmtime
from wasmtime import _bindings as ffi

from spawnml.backend import program_cache_limit, trim_lru
from spawnml.errors import BackendError, KernelCompileError
from spawnml.kernel.disk_cache import KernelDiskCache
from spawnml.threads import split_range

from .memory import LinearMemory
from .plan import HEADER, plan_module
from .wat import WatKernel

# Below this much work per thread (statements executed, ``analysis.work_estimate``), handing
# part of a launch to another thread costs more than it saves.
MIN_WORK_PER_THREAD = 65536
# Modules kept compiled, and instances per thread's Store: a wasmtime Store frees its
# instances only with itself, so a thread starts a new Store when its own is full (recorded
# plans keep the Store their bound calls use alive).
MAX_MODULES = 64


def make_engine() -> wasmtime.Engine:
    cfg = wasmtime.Config()
    cfg.wasm_threads = True
    cfg.shared_memory = True
    cfg.wasm_simd = True
    return wasmtime.Engine(cfg)


class Program:
    """A compiled kernel module; ``run(lo, hi, out, *inputs)`` is called per thread.

    ``size``: invocations; ``work``: statements one invocation executes (an estimate);
    ``source``: the module's WAT (whole-plan modules link kernels from it)."""

    def __init__(
        self, key: str, module: wasmtime.Module, size: int, work: int = 1, source: str = ""
    ) -> None:
        self.key = key
        self.module = module
        self.source = source
        self.size = size
        self.work = max(1, work)

    def parts(self, threads: int) -> int:
        """How many threads this launch is worth splitting across."""
        return min(threads, max(1, self.size * self.work // MIN_WORK_PER_THREAD))


class Runtime:
    """The engine, module cache, shared memory and worker threads of one backend."""

    def __init__(self, threads: int) -> None:
        self.engine = make_engine()
        self.memory = LinearMemory(self.engine)
        self.threads = max(1, threads)
        self._modules: dict[str, wasmtime.Module] = {}
        self._local = threading.local()
        self._pool = (
            ThreadPoolExecutor(self.threads - 1, "spawnml-wasm") if self.threads > 1 else None
        )
        self.disk_hits = 0

    # -- compilation ----------------------------------------------------------------------
    def program(self, key: str, wat: str, size: int, work: int = 1) -> Program:
        """The compiled module of ``wat`` as a program of ``size`` invocations of ``work``
        statements each."""
        return Program(key, self.module(wat), size, work, wat)

    def module(self, wat: str) -> wasmtime.Module:
        digest = hashlib.sha256(wat.encode()).hexdigest()
        module = self._modules.pop(digest, None)
        if module is not None:
            self._modules[digest] = module  # the most recently used
            return module
        disk = KernelDiskCache("wasm", "cwasm")
        key = (digest, metadata.version("wasmtime"))
        data = disk.get(*key)
        if data is not None:
            try:
                module = wasmtime.Module.deserialize(self.engine, data)
                self.disk_hits += 1
            except wasmtime.WasmtimeError:
                module = None  # stale or corrupt: compile again and overwrite
        if module is None:
            try:
                module = wasmtime.Module(self.engine, wat)
            except wasmtime.WasmtimeError as exc:
                raise KernelCompileError(
                    f"wasm: the generated module does not compile: {exc}"
                ) from None
            disk.put(module.serialize(), *key)
        self._modules[digest] = module
        trim_lru(self._modules, program_cache_limit(MAX_MODULES))
        return module

    # -- execution ------------------------------------------------------------------------
    def _function(self, program: Program) -> tuple[wasmtime.Store, Any]:
        """This thread's instance of ``program``: (store, exported run function)."""
        store, exports = self._instance(program)
        return store, exports[0]

    def _export(self, program: Program, name: str) -> Any:
        """Export ``name`` of this thread's instance of ``program``."""
        return self._instance(program)[1][1][name]

    def _instance(self, program: Program) -> tuple[wasmtime.Store, tuple[Any, Any]]:
        local = self._local
        found = local.instances.get(program.key) if hasattr(local, "store") else None
        if found is None:
            if not hasattr(local, "store") or len(local.instances) >= program_cache_limit(
                    MAX_MODULES):
                local.store = wasmtime.Store(self.engine)
                local.instances = {}
            instance = wasmtime.Instance(local.store, program.module, [self.memory.memory])
            exports = instance.exports(local.store)
            found = local.instances[program.key] = (exports["run"], exports)
        return local.store, found

    def _run_range(self, program: Program, lo: int, hi: int, addresses: list[int]) -> None:
        store, fn = self._function(program)
        try:
            fn(store, lo, hi, *addresses)
        except wasmtime.Trap as exc:
            raise BackendError(f"wasm: kernel {program.key} trapped: {exc}") from None

    def run(self, program: Program, addresses: list[int]) -> None:
        """Run every output element, split by output range across the worker threads."""
        n = program.size
        parts = program.parts(self.threads)
        if parts == 1 or self._pool is None:
            self._run_range(program, 0, n, addresses)
            return
        bounds = split_range(n, parts, align=4)  # keeps every chunk on the SIMD path
        futures = [
            self._pool.submit(self._run_range, program, lo, hi, addresses) for lo, hi in bounds[1:]
        ]
        self._run_range(program, *bounds[0], addresses)
        for f in futures:
            f.result()

    def bind(self, program: Program, addresses: Sequence[int]) -> Callable[[], None]:
        """A callable running the launch with these addresses (recorded plans); its
        ``launch`` attribute is ``(program, addresses)`` (``sequence`` links those).

        A launch too small to split across threads runs on the calling thread through
        wasmtime's unchecked call with its raw arguments prepared once: no per-call type
        lookups, conversions or thread hand-off (``Func.__call__`` costs ~20 us, this ~1 us).
        Called from another thread than the one that bound it, it takes the checked path."""
        n = program.size
        addresses = list(addresses)
        bound: Any
        if program.parts(self.threads) > 1 and self._pool:
            bound = functools.partial(self.run, program, addresses)
        else:
            checked = functools.partial(self._run_range, program, 0, n, addresses)
            bound = self._unchecked(program, [0, n, *addresses], checked)
        bound.launch = (program, addresses)
        return bound

    def _unchecked(
        self, program: Program, values: list[int], checked: Callable[[], Any]
    ) -> Callable[[], None]:
        """A callable of ``program``'s run with these i32 arguments through the unchecked
        call, on the thread that made it (``checked`` on any other thread)."""
        store, fn = self._function(program)
        args = (ffi.wasmtime_val_raw * len(values))()
        for i, v in enumerate(values):
            args[i].i32 = v - (1 << 32) if v >= 1 << 31 else v
        call, context, func = ffi._wasmtime_func_call_unchecked, store._context(), fn._func
        trap = ctypes.POINTER(ffi.wasm_trap_t)()
        func_ref, trap_ref, count = ctypes.byref(func), ctypes.byref(trap), len(values)
        owner, ident = threading.get_ident(), threading.get_ident

        def bound() -> None:
            if ident() != owner:
                checked()
                return
            error = call(context, func_ref, args, count, trap_ref)
            if error or trap:
                self._failed(program, error, trap)

        bound.keep = (store, fn, args, trap)  # type: ignore[attr-defined]
        return bound

    def sequence(self, bound: Sequence[Callable[[], None]]) -> Callable[[], None] | None:
        """One callable running these ``bind`` results as one plan module (``plan``): one
        call per thread for the whole sequence. None when one of them is not a bound launch.
        """
        launches = [getattr(b, "launch", None) for b in bound]
        if len(launches) < 2 or any(x is None for x in launches):
            return None
        kernels: list[WatKernel] = []
        index: dict[str, int] = {}
        spec, words = [], []
        for program, addresses in launches:  # type: ignore[misc]
            if program.key not in index:
                index[program.key] = len(kernels)
                kernels.append(WatKernel.parse(program.source))
            spec.append((index[program.key], program.size, program.parts(self.threads),
                         len(addresses)))  # fmt: skip
            words += addresses
        text = plan_module(kernels, spec)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        program = Program(f"plan-{digest}", self.module(text), 0, source=text)
        threads = self.threads if self._pool and any(s[2] > 1 for s in spec) else 1
        nbytes = HEADER + 4 * len(words)
        block = self.memory.allocate(nbytes)
        view = self.memory.view(block, nbytes)
        view[:HEADER] = 0
        view[HEADER:] = np.asarray(words, np.uint32).view(np.uint8)
        call = PlanCall(self, program, block, threads)
        weakref.finalize(call, self.memory.release, block, nbytes)
        return call

    def _failed(self, program: Program, error: Any, trap: Any) -> None:
        if trap:
            message = str(wasmtime.Trap._from_ptr(trap))
            ctypes.cast(ctypes.byref(trap), ctypes.POINTER(ctypes.c_void_p))[0] = None
        else:
            message = str(wasmtime.WasmtimeError._from_ptr(error))
        raise BackendError(f"wasm: kernel {program.key} trapped: {message}")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class PlanCall:
    """A plan module's run over its argument block: thread 0 on the calling thread, the
    others on the runtime's pool; a trap on any thread aborts the rest (no barrier is left
    waiting) and raises BackendError."""

    def __init__(self, runtime: Runtime, program: Program, block: int, threads: int) -> None:
        self.runtime, self.program, self.block, self.threads = runtime, program, block, threads
        self._header = runtime.memory.view(block, HEADER)
        main = functools.partial(self._run, 0)
        self._main = runtime._unchecked(program, [0, threads, block], main)

    def _run(self, tid: int) -> None:
        store, fn = self.runtime._function(self.program)
        try:
            fn(store, tid, self.threads, self.block)
        except wasmtime.Trap as exc:
            self._abort()
            raise BackendError(f"wasm: plan {self.program.key} trapped: {exc}") from None

    def _abort(self) -> None:
        store, _ = self.runtime._function(self.program)
        self.runtime._export(self.program, "abort")(store, self.block)

    def __call__(self) -> None:
        if self.threads == 1:
            self._main()
            return
        self._header[:] = 0  # barrier count and abort flag (no thread runs the plan now)
        pool = self.runtime._pool
        assert pool is not None
        futures = [pool.submit(self._run, t) for t in range(1, self.threads)]
        try:
            self._main()
        except BackendError:
            self._abort()
            raise
        finally:
            for f in futures:
                f.result()
