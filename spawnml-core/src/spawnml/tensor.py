"""DeviceTensor: a tensor whose data lives in one backend buffer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType

import numpy as np

from .backend import Backend, Buffer
from .dtypes import DType, dtype as as_dtype
from .errors import InvalidInputError, TensorClosedError


class DeviceTensor:
    """Owns one backend buffer; ``numpy()`` copies it to the host, ``close()`` frees it."""

    __slots__ = ("_buffer", "backend", "shape", "dtype", "_owner")

    def __init__(
        self,
        backend: Backend,
        buffer: Buffer,
        shape: Sequence[int],
        dtype: DType | str,
        *,
        _owner: DeviceTensor | None = None,
    ) -> None:
        self.backend = backend
        self._buffer: Buffer | None = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        self._owner = _owner  # a reshape view keeps its owner alive and never frees

    @classmethod
    def from_numpy(cls, backend: Backend, array: np.ndarray) -> DeviceTensor:
        array = np.asarray(array)
        return cls(backend, backend.upload(array), array.shape, as_dtype(array.dtype))

    @classmethod
    def empty(cls, backend: Backend, shape: Sequence[int], dt: DType | str) -> DeviceTensor:
        dt = as_dtype(dt)
        size = int(math.prod(shape))
        nbytes = size * backend.storage_dtype(dt).itemsize
        return cls(backend, backend.alloc(nbytes), shape, dt)

    @property
    def buffer(self) -> Buffer:
        if self._buffer is None or (self._owner is not None and self._owner.closed):
            raise TensorClosedError(
                f"DeviceTensor(shape={self.shape}, dtype={self.dtype}) on {self.backend.name} "
                "was used after close()"
            )
        return self._buffer

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
        """A view with a new shape over the same buffer (no copy)."""
        shape = tuple(int(d) for d in shape)
        if int(math.prod(shape)) != self.size:
            raise InvalidInputError(
                f"cannot reshape {self.shape} ({self.size} elements) to {shape}"
            )
        owner = self._owner or self
        return DeviceTensor(self.backend, self.buffer, shape, self.dtype, _owner=owner)

    def close(self) -> None:
        """Free the buffer (views only detach). Idempotent."""
        if self._buffer is not None and self._owner is None:
            self.backend.free(self._buffer)
        self._buffer = None

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
