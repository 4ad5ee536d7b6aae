"""DeviceTensor: a tensor whose data lives in one backend buffer.

Ownership: a buffer is held by a small reference-counted storage record. Every *owning*
DeviceTensor (one made by ``empty``/``from_numpy``, or another handle made by ``share``)
holds one reference, and the buffer goes back to the backend when the last owning handle is
closed, so handles sharing a buffer (two graph outputs aliasing one value, one output
requested twice, an output that is a reshape of a feed) can be closed in any order. A
``reshape`` view is lighter: it holds no reference, stays valid while the tensor it views is
open, and closing it only detaches it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from types import TracebackType

import numpy as np

from .backend import Backend, Buffer
from .dtypes import DType, dtype as as_dtype
from .errors import InvalidInputError, OutOfMemoryError, TensorClosedError

_refs_lock = threading.Lock()


class _Storage:
    """One backend buffer and how many owning DeviceTensors hold it."""

    __slots__ = ("backend", "buffer", "refs")

    def __init__(self, backend: Backend, buffer: Buffer) -> None:
        self.backend = backend
        self.buffer: Buffer | None = buffer
        self.refs = 1

    def retain(self) -> None:
        """Add an owner (the buffer must still be allocated)."""
        with _refs_lock:
            self.refs += 1

    def release(self) -> None:
        """Drop an owner; the last one frees the buffer."""
        with _refs_lock:
            self.refs -= 1
            buffer = self.buffer if self.refs == 0 else None
            if buffer is not None:
                self.buffer = None
        if buffer is not None:
            self.backend.free(buffer)


class DeviceTensor:
    """A tensor in one backend buffer; ``numpy()`` copies it to the host, ``close()``
    releases this handle (the buffer is freed when no owning handle is left)."""

    __slots__ = ("_buffer", "backend", "shape", "dtype", "_owner", "_storage")

    def __init__(
        self,
        backend: Backend,
        buffer: Buffer,
        shape: Sequence[int],
        dtype: DType | str,
        *,
        _owner: DeviceTensor | None = None,
        _storage: _Storage | None = None,
    ) -> None:
        self.backend = backend
        self._buffer: Buffer | None = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        self._owner = _owner  # a reshape view: valid while its owner is open, never frees
        # An owning handle's reference (already retained by the caller when passed in).
        self._storage = None if _owner is not None else (_storage or _Storage(backend, buffer))

    @classmethod
    def from_numpy(cls, backend: Backend, array: np.ndarray) -> DeviceTensor:
        array = np.asarray(array)
        return cls(backend, backend.upload(array), array.shape, as_dtype(array.dtype))

    @classmethod
    def empty(cls, backend: Backend, shape: Sequence[int], dt: DType | str) -> DeviceTensor:
        """An uninitialised tensor; OutOfMemoryError (naming shape, dtype and bytes) where
        the backend cannot allocate it."""
        dt = as_dtype(dt)
        size = int(math.prod(shape))
        nbytes = size * backend.storage_dtype(dt).itemsize
        try:
            buffer = backend.alloc(nbytes)
        except OutOfMemoryError:
            raise
        except MemoryError as exc:  # the backend's own allocator (numpy, a driver) gave up
            raise OutOfMemoryError(
                f"{backend.name}: cannot allocate a {dt} tensor of shape {tuple(shape)} "
                f"({nbytes} bytes): {exc}"
            ) from exc
        return cls(backend, buffer, shape, dt)

    @property
    def buffer(self) -> Buffer:
        if self.closed:
            raise TensorClosedError(
                f"DeviceTensor(shape={self.shape}, dtype={self.dtype}) on {self.backend.name} "
                "was used after close()"
            )
        return self._buffer  # type: ignore[return-value]

    @property
    def closed(self) -> bool:
        return self._buffer is None or (self._owner is not None and self._owner.closed)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """A host copy of the data."""
        return self.backend.download(self.buffer, self.shape, self.dtype)

    def reshape(self, shape: Sequence[int]) -> DeviceTensor:
        """A view with a new shape over the same buffer (no copy), valid while this tensor
        is open; use ``share`` for a handle that outlives it."""
        shape = tuple(int(d) for d in shape)
        if int(math.prod(shape)) != self.size:
            raise InvalidInputError(
                f"cannot reshape {self.shape} ({self.size} elements) to {shape}"
            )
        owner = self._owner or self
        return DeviceTensor(self.backend, self.buffer, shape, self.dtype, _owner=owner)

    def share(
        self, shape: Sequence[int] | None = None, dtype: DType | str | None = None
    ) -> DeviceTensor:
        """Another owning handle on this buffer, closed independently of this one (the
        buffer is freed when every owning handle is closed). ``shape``/``dtype`` see the
        same bytes as another tensor, e.g. a typed value in a raw buffer; the caller
        guarantees the buffer holds that many elements."""
        buffer = self.buffer  # raises TensorClosedError when closed
        root = self._owner or self
        storage = root._storage
        assert storage is not None and storage.buffer is buffer
        storage.retain()
        return DeviceTensor(
            self.backend,
            buffer,
            self.shape if shape is None else shape,
            self.dtype if dtype is None else dtype,
            _storage=storage,
        )

    def close(self) -> None:
        """Release this handle (a view only detaches). Idempotent."""
        storage, self._storage = self._storage, None
        self._buffer = None
        if storage is not None:
            storage.release()

    def __enter__(self) -> DeviceTensor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.backend.name
        return f"DeviceTensor(shape={self.shape}, dtype={self.dtype}, {state})"
