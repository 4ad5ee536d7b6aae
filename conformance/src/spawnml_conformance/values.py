"""Input values: random data per dtype, dtype conversion and edge-value injection."""

from __future__ import annotations

import numpy as np

# Edge values per float dtype and family. Families are separate variants so a backend that
# declares it flushes subnormals skips only the subnormal one.
EDGES: dict[str, dict[str, list[float]]] = {
    "float32": {
        "nan_inf": [np.nan, np.inf, -np.inf, -0.0, 0.0],
        "subnormal": [1e-40, -1e-40, 1.4e-45, -2.5e-39],
        # Large enough that exp() overflows and cancellation loses the small values, small
        # enough that squares and sums stay finite in float32.
        "large": [1.0e10, -1.0e10, 9.0e3, -9.0e3],
        # Next to float32's maximum: only for elementwise ops (overflow to ±inf).
        "huge": [3.0e38, -3.0e38, 1.0e38],
    },
    "float16": {
        "nan_inf": [np.nan, np.inf, -np.inf, -0.0, 0.0],
        "subnormal": [6.0e-8, -6.0e-8, 3.0e-5, -1.2e-5],
        "large": [2.0e3, -2.0e3, 1.2e2, -1.2e2],
        "huge": [6.0e4, -6.0e4, 3.0e4],
    },
}
EDGES["float64"] = EDGES["float32"]


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Ordinary values of ``dtype``: N(0, 2) floats, small integers, random bools."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 2).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    lo = 0 if dtype.kind == "u" else -9
    return rng.integers(lo, 10, shape).astype(dtype)


def convert(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` as ``dtype`` with values that stay meaningful (floats scaled and rounded
    into the integer range, magnitudes for unsigned types)."""
    dtype, array = np.dtype(dtype), np.asarray(array)
    if dtype.kind in "iu" and array.dtype.kind == "f":
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            x = np.nan_to_num(np.round(array.astype(np.float64) * 3), posinf=0, neginf=0)
        if dtype.kind == "u":
            x = np.abs(x)
        return np.clip(x, max(info.min, -100), min(info.max, 100)).astype(dtype)
    if dtype.kind == "b":
        return array != 0 if array.dtype.kind != "f" else array > 0
    return array.astype(dtype)


def inject(array: np.ndarray, values: list[float], shift: int) -> np.ndarray:
    """A copy of ``array`` with ``values`` written at spread-out positions (rotated by
    ``shift`` so that several inputs pair different edge values)."""
    out = np.array(array, copy=True)
    flat = out.reshape(-1)
    n = flat.size
    if n == 0:
        return out
    step = max(1, n // len(values))
    for k in range(len(values)):
        pos = (k * step + shift) % n
        flat[pos] = values[(k + shift) % len(values)]
        if k * step >= n:
            break
    return out


def has_subnormals(array: np.ndarray) -> bool:
    a = np.asarray(array)
    if a.dtype.kind != "f" or a.size == 0:
        return False
    # float64 computes as float32 on devices, so float32's smallest normal applies to it
    tiny = np.finfo(np.float16 if a.dtype == np.float16 else np.float32).tiny
    with np.errstate(invalid="ignore"):
        return bool(np.any((a != 0) & (np.abs(a.astype(np.float64)) < tiny)))
