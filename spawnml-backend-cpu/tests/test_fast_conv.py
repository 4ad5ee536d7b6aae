"""Every ConvPlan path, with and without bias and a fused Relu finish, against Conv's
float64 numpy reference; the path each geometry takes is asserted, so none goes untested."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.op import Node
from spawnml.registry import find_op
from spawnml_backend_cpu.fast_conv import ConvPlan
from spawnml_backend_cpu.fast_kernels import relu_into
from spawnml_backend_cpu.fast_window import window

RNG = np.random.default_rng(11)
CONV = find_op("", "Conv", 17)

# name, x shape, w shape, group, strides, pads, expected path
GEOMETRIES = [
    ("pointwise_expand", (2, 3, 5, 6), (8, 3, 1, 1), 1, (1, 1), (0, 0, 0, 0), "pointwise"),
    ("pointwise_project", (1, 8, 5, 6), (3, 8, 1, 1), 1, (1, 1), (0, 0, 0, 0), "pointwise"),
    ("depthwise_short", (2, 6, 9, 9), (6, 1, 3, 3), 6, (2, 2), (1, 1, 1, 1), "depthwise"),
    ("depthwise_long", (1, 3, 40, 40), (3, 1, 3, 3), 3, (1, 1), (1, 1, 1, 1), "depthwise"),
    ("columns_dense", (2, 4, 9, 8), (5, 4, 3, 3), 1, (1, 2), (1, 0, 1, 1), "columns"),
    ("columns_grouped", (1, 6, 7, 7), (4, 3, 3, 3), 2, (1, 1), (1, 1, 1, 1), "columns"),
    ("strided_1d", (2, 3, 17), (4, 3, 5), 1, (2,), (2, 1), "strided"),
    ("strided_3d_depthwise", (1, 2, 5, 6, 4), (2, 1, 3, 3, 3), 2, (1, 1, 1),
     (1, 1, 1, 1, 1, 1), "strided"),
]  # fmt: skip


def relu_finish(out: np.ndarray, result: np.ndarray) -> None:
    relu_into(result, out)


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("finish", [np.copyto, relu_finish], ids=["plain", "relu"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_each_path_matches_the_reference(geo, finish, with_bias) -> None:
    _, x_shape, w_shape, group, strides, pads, path = geo
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32) if with_bias else None
    win = window(x_shape[2:], w_shape[2:], strides=strides, pads=pads)
    plan = ConvPlan(w, b, win, group, finish)
    assert plan.path == path
    out = np.full((x_shape[0], w_shape[0], *win.out), np.nan, np.float32)
    plan(x, out)
    attrs = {"group": group, "strides": list(strides), "pads": list(pads)}
    node = Node("Conv", ["x", "w", "b"][: 2 + with_bias], ["y"], attrs, "c", "", 17)
    want = CONV.reference(node, [x.astype(np.float64), w.astype(np.float64)]
                          + ([b.astype(np.float64)] if with_bias else []))[0]  # fmt: skip
    if finish is relu_finish:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_the_bias_folds_into_the_product_only_when_the_output_is_larger() -> None:
    win = window((4, 4), (1, 1))
    expand = ConvPlan(np.ones((8, 3, 1, 1), np.float32), np.ones(8, np.float32), win, 1)
    project = ConvPlan(np.ones((3, 8, 1, 1), np.float32), np.ones(3, np.float32), win, 1)
    assert expand.folded and expand.w.shape == (8, 4)
    assert not project.folded and project.w.shape == (3, 8)
