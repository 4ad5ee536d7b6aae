"""Comparison semantics: dtype floors, NaN/Inf placement, shapes and dtypes, max error."""

from __future__ import annotations

import numpy as np

from spawnml_conformance.tolerances import Tolerance, compare, tolerance_for


def test_dtype_floors_are_never_undercut() -> None:
    assert tolerance_for(np.float32) == Tolerance(1e-5, 1e-6)
    assert tolerance_for(np.float16, 1e-6, 0) == Tolerance(2e-3, 2e-3)
    assert tolerance_for(np.float32, 1e-3, 0).rtol == 1e-3  # a case may loosen
    assert tolerance_for(np.int64, 1.0, 1.0) == Tolerance(0.0, 0.0)  # integers are exact


def test_max_error_and_first_difference_are_reported() -> None:
    e = np.array([1.0, 2.0, 3.0], np.float32)
    r = compare(e + np.float32(1e-3), e)
    assert not r.ok and abs(r.max_error - 1e-3) < 1e-6 and "first at [0]" in r.message
    assert compare(e * (1 + 1e-6), e).ok


def test_nan_and_inf_must_match_exactly() -> None:
    e = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert compare(e.copy(), e).ok
    for k, bad in enumerate([0.0, -np.inf, np.inf, np.nan]):
        g = e.copy()
        g[k] = bad
        r = compare(g, e)
        assert not r.ok and r.max_error == np.inf, k


def test_integers_are_exact_and_shapes_and_dtypes_must_agree() -> None:
    e = np.array([1, 2, 3], np.int32)
    assert not compare(np.array([1, 2, 4], np.int32), e).ok
    assert not compare(e.astype(np.int64), e).ok
    assert not compare(e.reshape(3, 1), e).ok
    assert compare(np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32)).ok


def test_float64_also_accepts_the_reference_in_float32_range() -> None:
    # kernels compute float64 as float32 (DESIGN.md §7): 1/1e-40 may be inf, not 1e40
    e = np.array([1e40, -4e38, 2.0, 1e-300], np.float64)
    assert compare(np.array([np.inf, -np.inf, 2.0, 0.0]), e).ok
    assert compare(e.copy(), e).ok  # a native float64 result passes too
    # not any value: the wrong sign of inf, or an error beyond the tolerance, still fails
    assert not compare(np.array([-np.inf, -np.inf, 2.0, 0.0]), e).ok
    assert not compare(np.array([np.inf, -np.inf, 2.1, 0.0]), e).ok
    # and float32 outputs get no such allowance
    assert not compare(np.array([np.inf], np.float32), np.array([1e38], np.float32)).ok
