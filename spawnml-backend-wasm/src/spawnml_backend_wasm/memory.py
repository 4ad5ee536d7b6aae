"""One shared wasm32 linear memory holding every tensor, and the allocator inside it.

The memory is a wasmtime ``SharedMemory`` (so worker threads' instances all import it). Its
address range is reserved up to the wasm32 maximum when created, so growing it never moves
the data and numpy views stay valid. Blocks are 16-byte aligned (v128 loads); freed blocks
return to a free list that coalesces neighbours. The backend's ``BufferPool`` in front rounds
requests to size classes, so blocks come in few sizes and are reused whole.
"""

from __future__ import annotations

import bisect
import ctypes

import numpy as np
import wasmtime

from spawnml.errors import OutOfMemoryError

PAGE = 65536
MAX_PAGES = 65536  # wasm32: 4 GiB
MAX_BYTES = PAGE * MAX_PAGES  # also backend.MAX_BYTES (kept free of this module's import)
_ALIGN = 16
_BASE = 1024  # offset 0 stays unused, so a zero address is never a tensor
SLACK = 16  # readable bytes kept after the last block: a stride-2 vector load reads past its
# last lane (TargetTraits.strided_vector_loads)


def shared_memory_extern(memory: wasmtime.SharedMemory) -> wasmtime.SharedMemory:
    """Make ``memory`` importable into an instance.

    wasmtime-py 50.0.1's ``SharedMemory._as_extern`` wraps its pointer once too often
    (``ctypes.pointer(self.ptr())``), so instantiating a module that imports it raises a
    TypeError about ``LP_LP_wasmtime_sharedmemory``. The extern union wants the plain pointer:
    patch this one object's method (not the class) to build it so. Harmless on fixed versions.
    """
    from wasmtime import _ffi as ffi

    def as_extern() -> ffi.wasmtime_extern_t:
        union = ffi.wasmtime_extern_union(sharedmemory=memory.ptr())
        return ffi.wasmtime_extern_t(ffi.WASMTIME_EXTERN_SHAREDMEMORY, union)

    memory._as_extern = as_extern  # type: ignore[method-assign]
    return memory


class LinearMemory:
    """The shared linear memory, its allocator and zero-copy numpy views of it."""

    def __init__(self, engine: wasmtime.Engine, initial_pages: int = 16) -> None:
        ty = wasmtime.MemoryType(wasmtime.Limits(initial_pages, MAX_PAGES), shared=True)
        self.memory = shared_memory_extern(wasmtime.SharedMemory(engine, ty))
        self._free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
        self.top = _BASE  # everything at or above is unallocated
        self.live = 0
        self._bytes = self._map()

    # -- raw bytes ------------------------------------------------------------------------
    def _map(self) -> np.ndarray:
        n = self.memory.data_len()
        ptr = ctypes.cast(self.memory.data_ptr(), ctypes.POINTER(ctypes.c_uint8))
        return np.ctypeslib.as_array(ptr, shape=(n,))

    @property
    def size(self) -> int:
        """Current size in bytes."""
        return self.memory.data_len()

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        """A uint8 numpy view (no copy) of ``nbytes`` at ``offset``."""
        return self._bytes[offset : offset + nbytes]

    def _ensure(self, end: int) -> None:
        """Grow the memory so that bytes below ``end`` exist."""
        have = self.memory.data_len()
        if end <= have:
            return
        pages = -(-(end - have) // PAGE)
        # grow at least by half the current size, so a series of allocations grows rarely
        pages = max(pages, min(have // PAGE // 2, MAX_PAGES - have // PAGE))
        try:
            self.memory.grow(pages)
        except wasmtime.WasmtimeError as exc:
            raise OutOfMemoryError(
                f"wasm: growing linear memory from {have} bytes by {pages} pages failed: {exc}"
            ) from None
        self._bytes = self._map()

    # -- allocation -----------------------------------------------------------------------
    def allocate(self, nbytes: int) -> int:
        """The offset of a new block of at least ``nbytes`` (16-byte aligned)."""
        size = max(_ALIGN, -(-nbytes // _ALIGN) * _ALIGN)
        for i, (off, free) in enumerate(self._free):
            if free >= size:
                if free == size:
                    del self._free[i]
                else:
                    self._free[i] = (off + size, free - size)
                self.live += size
                return off
        off = self.top
        if off + size > MAX_BYTES:
            raise OutOfMemoryError(
                f"wasm: a buffer of {nbytes} bytes does not fit in the wasm32 linear memory "
                f"(4 GiB at most; {self.live} bytes live, {MAX_BYTES - off} bytes left above the "
                "highest allocation)"
            )
        self._ensure(off + size + SLACK)
        self.top = off + size
        self.live += size
        return off

    def release(self, offset: int, nbytes: int) -> None:
        """Return a block to the free list, merging it with free neighbours."""
        size = max(_ALIGN, -(-nbytes // _ALIGN) * _ALIGN)
        self.live -= size
        i = bisect.bisect(self._free, (offset, size))
        if i < len(self._free) and offset + size == self._free[i][0]:
            size += self._free.pop(i)[1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == offset:
            offset, size = self._free[i - 1][0], self._free[i - 1][1] + size
            del self._free[i - 1]
            i -= 1
        if offset + size == self.top:
            self.top = offset
        else:
            self._free.insert(i, (offset, size))
