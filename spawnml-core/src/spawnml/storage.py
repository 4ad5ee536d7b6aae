"""How a backend stores element types it lacks, and the host conversions to and from them.

``Backend.storage_dtype`` (``spawnml.backend``) asks :func:`lowered_storage` for the type a
tensor of a missing dtype is kept as; ``Backend.upload``/``download`` convert with
:func:`to_storage` and :func:`from_storage`. The rules:

* int64 -> int32 and uint64 -> uint32 (targets without 64-bit integers): the upload checks
  every value fits and raises :class:`~spawnml.errors.InvalidInputError` otherwise, so a
  value is never wrapped silently;
* float16, float64 -> float32; bool and int8/16, uint8/16 -> wider integers;
* bfloat16 -> its 16 bits in uint16 words (the kernels widen and round them, see
  ``spawnml.kernel.passes.bf16_memory``), or float32 holding bfloat16 values where the
  target has no 16-bit words.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from .dtypes import DType
from .errors import InvalidInputError

_WIDER: dict[DType, tuple[DType, ...]] = {
    DType.int64: (DType.int32,),
    DType.uint64: (DType.uint32,),
    DType.float16: (DType.float32,),
    DType.float64: (DType.float32,),
    DType.bfloat16: (DType.uint16, DType.float32),
    DType.bool: (DType.uint8, DType.uint32, DType.int32),
    DType.int8: (DType.int32,),
    DType.int16: (DType.int32,),
    DType.uint8: (DType.int32,),
    DType.uint16: (DType.int32,),
}
"""Missing dtype -> the types that may hold it, in order of preference."""

_NARROWED_INTS = {(DType.int64, DType.int32), (DType.uint64, DType.uint32)}


def lowered_storage(dt: DType, native: Collection[DType]) -> DType | None:
    """The dtype a backend storing ``native`` keeps ``dt`` as (None: it cannot)."""
    if dt in native:
        return dt
    return next((alt for alt in _WIDER.get(dt, ()) if alt in native), None)


def to_storage(array: np.ndarray, storage: DType, where: str) -> np.ndarray:
    """``array`` converted to ``storage`` for upload; 64-bit integers narrowed to 32 bits
    must fit (InvalidInputError naming ``where`` otherwise), bfloat16 goes as its bits."""
    src = array.dtype
    if src == DType.bfloat16.numpy and storage is DType.uint16:
        return array.view(np.uint16)
    if array.size and any(src == wide.numpy and storage is narrow
                          for wide, narrow in _NARROWED_INTS):
        _check_range(array, storage, where)
    return array.astype(storage.numpy)


def from_storage(host: np.ndarray, storage: DType, dt: DType) -> np.ndarray:
    """A downloaded array of ``storage`` elements as logical dtype ``dt``."""
    if storage is DType.uint16 and dt is DType.bfloat16:
        return host.view(dt.numpy)
    return host.astype(dt.numpy)


def _check_range(array: np.ndarray, storage: DType, where: str) -> None:
    info = np.iinfo(storage.numpy)
    lo, hi = int(array.min()), int(array.max())
    if lo < info.min or hi > info.max:
        raise InvalidInputError(
            f"{where} stores {array.dtype} as {storage}, but the tensor holds values in "
            f"[{lo}, {hi}], outside the {storage} range"
        )
