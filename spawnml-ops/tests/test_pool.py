"""Pooling: every declared case on cpu and webgpu against the op's numpy reference, the
reference against onnx.reference (where that is right), and attribute validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on

import spawnml
from spawnml.errors import InvalidModelError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml.testing.op_check import check_onnx_reference
from spawnml_ops import pool
from spawnml_ops.pool import AveragePool, MaxPool

CASES = family_cases(pool.OPS)
# Where onnx.reference (1.23) is wrong or missing; onnx shape inference agrees with our shapes.
GAPS = {
    ("MaxPool", "max2d_same_lower"): "its MaxPool SAME_LOWER output is one row short",
    ("MaxPool", "max2d_indices_asym_pads"): "its Indices path reads pads as (begin, end) pairs",
    ("GlobalMaxPool", "global1d"): "its GlobalMaxPool assumes two spatial dims",
    ("GlobalMaxPool", "global3d"): "its GlobalMaxPool assumes two spatial dims",
    ("GlobalMaxPool", "global_nan_inf"): "its GlobalMaxPool propagates NaN (np.max); "
                                         "onnxruntime skips NaN unless a plane is all NaN",
    **{("MaxPool", f"max2d_nan_windows_{kind}"): "its padded MaxPool propagates a NaN tap; "
       "spawnml skips NaN taps (NaN when every tap is; onnxruntime's answer depends on the "
       "order of its SIMD max)" for kind in ("tiled", "stride1")},
    **{("GlobalLpPool", c.name): "it has no GlobalLpPool" for c in pool.GlobalLpPool().cases()},
}
# Its Indices are wrong with pads (negative) and in 3-D (storage_order ignored, taps outside
# the window); the official maxpool_with_argmax tests pass. Compare the values only.
VALUES_ONLY = {("MaxPool", "max3d_indices"), ("MaxPool", "max2d_indices")}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    if (op.op_type, case.name) in VALUES_ONLY:
        check_onnx_reference(op, case, skip_output=(1,))
    else:
        check_reference(op, case, GAPS)


def _run(op, attrs, x, outputs=("y",)):
    node = Node(op.op_type, ["x"], list(outputs), attrs, name="p1", opset=21)
    return run_node(spawnml.get_backend("cpu"), op, node, [x])


@pytest.mark.parametrize("attrs,pattern", [
    ({}, "'kernel_shape'"),
    ({"kernel_shape": (2,)}, "'kernel_shape' has 1 values"),
    ({"kernel_shape": (2, 2), "ceil_mode": 2}, "'ceil_mode'"),
    ({"kernel_shape": (2, 2), "pads": (2, 0, 0, 0)}, "'pads'"),
    ({"kernel_shape": (2, 2), "strides": (0, 1)}, "'strides'"),
    ({"kernel_shape": (9, 2)}, "exceeds"),
])
def test_pool_attribute_errors_name_node_and_attribute(attrs, pattern) -> None:
    with pytest.raises(InvalidModelError, match=f"p1.*{pattern}"):
        _run(AveragePool(), attrs, np.zeros((1, 1, 4, 4), np.float32))


def test_maxpool_storage_order_validated_with_indices() -> None:
    with pytest.raises(InvalidModelError, match=r"p1.*'storage_order'"):
        _run(MaxPool(), {"kernel_shape": (2, 2), "storage_order": 3},
             np.zeros((1, 1, 4, 4), np.float32), outputs=("y", "i"))


def test_maxpool_indices_point_at_the_maximum() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    y, idx = _run(MaxPool(), {"kernel_shape": (2, 2), "pads": (1, 0, 0, 1)}, x,
                  outputs=("y", "i"))
    np.testing.assert_array_equal(x.ravel()[idx], y)


def test_average_pool_ceil_mode_counts_only_real_and_padded_taps() -> None:
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    attrs = {"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": 1}
    (y,) = _run(AveragePool(), attrs, x)
    np.testing.assert_allclose(y[0, 0], [[2.0, 3.5], [6.5, 8.0]])
    (y,) = _run(AveragePool(), {**attrs, "pads": (1, 1, 0, 0), "count_include_pad": 1}, x)
    np.testing.assert_allclose(y[0, 0], [[0.0, (1 + 2) / 4], [(3 + 6) / 4, (4 + 5 + 7 + 8) / 4]])
