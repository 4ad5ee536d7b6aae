"""Dtype-aware tolerances and the comparison every suite uses (with the maximum error).

A case may declare its own ``rtol``/``atol``; the dtype's floor below is never undercut:

| output dtype | rtol | atol | why |
|---|---|---|---|
| float32 | 1e-5 | 1e-6 | a few ulp: transcendentals differ per target (see docs/kernels.md) |
| float64 | 1e-5 | 1e-6 | kernels compute float64 as float32 |
| float16 | 2e-3 | 2e-3 | two f16 ulp (f16 may be computed in f32 and rounded on store) |
| bfloat16 | 2**-6 | 2**-6 | two bf16 ulp (as onnx's own test runner; compared as float32) |
| integers, bool | 0 | 0 | exact |

NaN must be NaN where the reference has NaN, ±Inf must match exactly, and the shape and the
dtype must be the reference's. The sign of zero is not compared. Kernels compute float64 with
float32's range (DESIGN.md §7), so a float64 element also passes where it matches the
reference rounded to float32 (a reference of 1e40 accepts inf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


FLOORS: dict[str, Tolerance] = {
    "float32": Tolerance(1e-5, 1e-6),
    "float64": Tolerance(1e-5, 1e-6),
    "float16": Tolerance(2e-3, 2e-3),
    "bfloat16": Tolerance(2**-6, 2**-6),
}
EXACT = Tolerance(0.0, 0.0)


def tolerance_for(dtype: np.dtype, rtol: float = 0.0, atol: float = 0.0) -> Tolerance:
    """The tolerance for an output of ``dtype``: the case's, but never below the floor."""
    floor = FLOORS.get(np.dtype(dtype).name)
    if floor is None:
        return EXACT
    return Tolerance(max(rtol, floor.rtol), max(atol, floor.atol))


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_error: float  # max |got - expected| over comparable elements (inf: NaN/Inf mismatch)
    message: str = ""


def compare(got: np.ndarray, expected: np.ndarray, tol: Tolerance | None = None) -> Comparison:
    """Compare one output with its reference."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return Comparison(False, float("inf"), f"shape {got.shape} != expected {expected.shape}")
    strings = got.dtype.kind in "OUS" and expected.dtype.kind in "OUS"  # object or <U: same
    if got.dtype != expected.dtype and not strings:
        return Comparison(False, float("inf"), f"dtype {got.dtype} != expected {expected.dtype}")
    if got.size == 0:
        return Comparison(True, 0.0)
    tol = tol or tolerance_for(expected.dtype)
    if expected.dtype.kind == "V" and "float" in expected.dtype.name:  # ml_dtypes: bfloat16...
        got, expected = got.astype(np.float32), expected.astype(np.float32)  # NaN stays NaN
    if strings:  # equal or not
        same = np.array([a == b for a, b in zip(got.reshape(-1), expected.reshape(-1))])
        n_bad = int((~same).sum())
        return Comparison(not n_bad, 0.0 if not n_bad else float("inf"),
                          f"{n_bad} of {same.size} strings differ" if n_bad else "")
    if expected.dtype.kind != "f":
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        bad = diff > tol.atol
        return _summary(bad, diff, got, expected)
    g, e = got.astype(np.float64), expected.astype(np.float64)
    bad, diff = _float_mismatch(g, e, tol)
    if expected.dtype == np.float64 and bad.any():
        with np.errstate(over="ignore"):
            in_float32 = e.astype(np.float32).astype(np.float64)
        bad32, diff32 = _float_mismatch(g, in_float32, tol)
        bad &= bad32
        diff = np.where(bad32, diff, np.minimum(diff, diff32))
    return _summary(bad, diff, got, expected)


def _float_mismatch(g: np.ndarray, e: np.ndarray,
                    tol: Tolerance) -> tuple[np.ndarray, np.ndarray]:
    """Per element: whether ``g`` misses ``e`` (NaN for NaN, the same ±Inf, else within
    ``tol``), and the error (inf for a NaN/Inf mismatch)."""
    with np.errstate(invalid="ignore", over="ignore"):
        nan_bad = np.isnan(g) != np.isnan(e)
        inf_e, inf_g = np.isinf(e), np.isinf(g)
        inf_bad = (inf_e | inf_g) & ~np.isnan(e) & ~np.isnan(g) & (g != e)
        finite = np.isfinite(g) & np.isfinite(e)
        diff = np.where(finite, np.abs(g - e), 0.0)
        bad = nan_bad | inf_bad | (finite & (diff > tol.atol + tol.rtol * np.abs(e)))
        diff = np.where(nan_bad | inf_bad, np.inf, diff)
    return bad, diff


def _summary(bad: np.ndarray, diff: np.ndarray, got: np.ndarray, exp: np.ndarray) -> Comparison:
    max_error = float(diff.max()) if diff.size else 0.0
    if not bad.any():
        return Comparison(True, max_error)
    first = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
    where = ",".join(str(int(i)) for i in first)
    return Comparison(
        False,
        max_error,
        f"{int(bad.sum())}/{bad.size} elements differ; first at [{where}]: "
        f"got {got[first]!r}, expected {exp[first]!r}",
    )
