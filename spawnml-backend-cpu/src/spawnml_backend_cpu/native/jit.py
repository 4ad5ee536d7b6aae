"""LLVM IR -> host machine code through llvmlite, cached on disk, run on a shared thread pool.

Each kernel's module is optimised at O3 for the host CPU (its name and features, so AVX2 or
AVX-512 where present), emitted as an object file and loaded into its own MCJIT engine, which
lives as long as its program. Object files are kept in spawnml's kernel disk cache
(``spawnml.kernel.disk_cache``) under a key of the IR text, the LLVM version and the host
CPU, so a new process skips the optimiser. A launch calls ``run(lo, hi, buffers)`` through
ctypes, which releases the GIL: the threads of one pool, shared by every cpu backend of the
process, compute disjoint invocation ranges in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from spawnml.errors import KernelCompileError
from spawnml.kernel.disk_cache import KernelDiskCache
from spawnml.threads import split_range

# Below this much work per thread (statements executed, ``analysis.work_estimate``), handing
# part of a launch to another thread costs more than it saves (as on the Wasm backend).
MIN_WORK_PER_THREAD = 65536
RUN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


class Host:
    """The LLVM target of this process's CPU (made once: ``host()``)."""

    def __init__(self) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.llvm = llvm
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.machine = self.target_machine()
        self.version = metadata.version("llvmlite")
        # what compiled code depends on beside the host: llvmlite, spawnml, the printer
        printer = Path(__file__).with_name("llvm_ir.py").read_bytes()
        self.code_version = (f"llvmlite {self.version} spawnml {metadata.version('spawnml-core')}"
                             f" printer {hashlib.sha256(printer).hexdigest()[:12]}")
        self.lock = threading.Lock()  # LLVM contexts are not thread-safe

    def target_machine(self) -> Any:
        """A new target machine for the host (an MCJIT engine owns and frees its own)."""
        target = self.llvm.Target.from_default_triple()
        return target.create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="jitdefault")

    @property
    def vector_width(self) -> int:
        """f32 lanes of the widest vector registers the host has (AVX-512: 16, AVX: 8)."""
        if "+avx512f" in self.features.split(","):
            return 16
        return 8 if "+avx" in self.features.split(",") else 4

    def object_code(self, text: str) -> bytes:
        """The optimised object file of module ``text`` (from the disk cache if there)."""
        disk = KernelDiskCache("cpu-native", "o")
        key = (hashlib.sha256(text.encode()).hexdigest(), self.version, self.cpu,
               self.features)
        data = disk.get(*key)
        if data is None:
            data = self.optimise(text)
            disk.put(data, *key)
        return data

    def optimise(self, text: str) -> bytes:
        llvm = self.llvm
        with self.lock:
            try:
                module = llvm.parse_assembly(text)
                module.triple = self.machine.triple
                module.data_layout = str(self.machine.target_data)
                module.verify()
            except RuntimeError as exc:
                raise KernelCompileError(
                    f"cpu-native: the generated LLVM IR does not verify: {exc}") from None
            options = llvm.create_pipeline_tuning_options(speed_level=3)
            options.loop_vectorization = True
            options.slp_vectorization = True
            builder = llvm.create_pass_builder(self.machine, options)
            builder.getModulePassManager().run(module, builder)
            return bytes(self.machine.emit_object(module))

    def load(self, data: bytes) -> tuple[Any, int]:
        """An engine holding object code ``data`` and the address of its ``run``."""
        llvm = self.llvm
        with self.lock:
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.target_machine())
            engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            engine.finalize_object()
            address = engine.get_function_address("run")
        if not address:
            raise KernelCompileError("cpu-native: the object file has no run function")
        return engine, address


@functools.cache
def host() -> Host:
    return Host()


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's worker threads (submitting to their pools
    would wait forever) and may hold locks another thread of the parent had taken."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()
    if host.cache_info().currsize:
        host().lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def pool(threads: int) -> ThreadPoolExecutor | None:
    """The process's pool of ``threads - 1`` workers (the caller is the last thread)."""
    if threads <= 1:
        return None
    with _POOLS_LOCK:
        found = _POOLS.get(threads)
        if found is None:
            found = _POOLS[threads] = ThreadPoolExecutor(threads - 1, "spawnml-cpu")
        return found


class NativeProgram:
    """A kernel compiled to machine code: ``size`` invocations of about ``work`` statements."""

    def __init__(self, kernel: Any, source: str, size: int, work: int) -> None:
        self.kernel = kernel
        self.key = kernel.key
        self.source = source
        self.size = size
        self.work = max(1, work)
        self.engine, address = host().load(host().object_code(source))
        self.fn = RUN(address)

    def parts(self, threads: int) -> int:
        """How many threads this launch is worth splitting across."""
        return min(threads, max(1, self.size * self.work // MIN_WORK_PER_THREAD))

    def bind(self, addresses: Sequence[int], threads: int) -> Callable[[], None]:
        """A callable running every invocation on ``addresses`` (output first)."""
        table = (ctypes.c_void_p * len(addresses))(*addresses)
        fn, n = self.fn, self.size
        ranges = split_range(n, self.parts(threads), align=4)
        workers = pool(threads) if len(ranges) > 1 else None
        if workers is None:

            def run() -> None:
                fn(0, n, table)

        else:
            first, rest = ranges[0], ranges[1:]

            def run() -> None:
                futures = [workers.submit(fn, lo, hi, table) for lo, hi in rest]
                fn(first[0], first[1], table)
                for f in futures:
                    f.result()

        run.keep = table  # type: ignore[attr-defined]
        return run
