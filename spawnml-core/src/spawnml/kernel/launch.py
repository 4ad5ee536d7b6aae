"""Run one kernel on a backend from host arrays (tests, conformance, quick experiments)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import Backend
from ..dtypes import DType, dtype as as_dtype
from .frontend import Kernel


def run_kernel(
    backend: Backend,
    k: Kernel,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    out_shape: Sequence[int],
    out_dtype: DType | str | np.dtype,
    **consts: Any,
) -> np.ndarray:
    """Specialise ``k``, upload ``inputs``, launch once, and return the output on the host."""
    arrays = dict(inputs) if isinstance(inputs, Mapping) else dict(zip(k.tensor_names, inputs))
    arrays = {n: np.asarray(a) for n, a in arrays.items()}
    out_dt = as_dtype(out_dtype)
    spec = k.specialize(arrays, (tuple(out_shape), out_dt), **consts)
    program = backend.compile(spec)
    buffers = [backend.upload(arrays[n]) for n in k.tensor_names]
    out_bytes = max(1, spec.output.size) * backend.storage_dtype(out_dt).itemsize
    out = backend.alloc(out_bytes)
    try:
        if spec.output.size:
            backend.launch(program, out, buffers)
        return backend.download(out, tuple(out_shape), out_dt)
    finally:
        backend.free(out)
        for b in buffers:
            backend.free(b)
