"""TensorScatter (KV-cache update, a gather kernel), MaxUnpool and Det (host)."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, i32, kernel, static_range
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import input_ints
from .common import normalize_axis

FLOATS = (DType.float32, DType.float16, DType.float64)


# ---------------------------------------------------------------------------- TensorScatter


@kernel
def tensor_scatter(past: Tensor, update: Tensor, widx: Tensor, out: Output, axis: int,
                   circular: bool, has_idx: bool):
    """The update row written at this position of the cache, else the past value."""
    rel = out.index[axis]
    if has_idx:
        rel = rel - cast(widx.flat[out.index[0]], i32)
    if circular:
        rel = rel % past.shape[axis]
    ok = rel >= 0 and rel < update.shape[axis]
    off = 0
    for d in static_range(out.ndim):
        if d == axis:
            off = off + min(max(rel, 0), update.shape[axis] - 1) * update.strides[d]
        else:
            off = off + out.index[d] * update.strides[d]
    u = update.flat[off]
    return u if ok else past.flat[out.flat]


class TensorScatter(OpDef):
    op_type = "TensorScatter"
    since_version = 24

    def _check(self, node: Node, inputs) -> tuple[int, bool]:
        past, upd = ([*list(inputs), None, None])[:2]
        if past is None or upd is None or past.shape is None or upd.shape is None:
            raise self.fail(node, "inputs past_cache and update (known ranks) are required")
        if len(past.shape) != len(upd.shape) or past.dtype != upd.dtype:
            raise self.fail(node, f"update {upd.dtype}{upd.shape} does not match "
                                  f"past_cache {past.dtype}{past.shape}")
        axis = normalize_axis(node, int(self.attr(node, "axis", -2)), len(past.shape))
        if axis == 0:
            raise self.fail(node, "axis cannot be the batch axis 0")
        for d, (p, u) in enumerate(zip(past.shape, upd.shape)):
            if isinstance(p, int) and isinstance(u, int) and (u > p if d == axis else u != p):
                raise self.fail(node, f"update {upd.shape} does not fit past_cache "
                                      f"{past.shape} along axis {d}")
        mode = self.attr(node, "mode", "linear")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("linear", "circular"):
            raise self.fail(node, f"attribute 'mode' = {mode!r} must be linear or circular")
        return axis, mode == "circular"

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        axis, circular = self._check(node, array_infos(inputs))
        past, upd = np.asarray(inputs[0]), np.asarray(inputs[1])
        w = inputs[2] if len(inputs) > 2 and inputs[2] is not None \
            else np.zeros(past.shape[0], np.int64)
        out = past.copy()
        for b in range(past.shape[0]):
            pos = int(w[b]) + np.arange(upd.shape[axis])
            if circular:
                pos %= past.shape[axis]
            if pos.size and (pos.min() < 0 or pos.max() >= past.shape[axis]):
                raise self.fail(node, f"write_indices[{b}] = {int(w[b])} writes outside the "
                                      "cache")
            # moveaxis gives views, so the assignment writes into out[b]
            np.moveaxis(out[b], axis - 1, 0)[pos] = np.moveaxis(upd[b], axis - 1, 0)
        return [out]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        axis, circular = self._check(node, inputs)
        has_idx = len(inputs) > 2 and inputs[2] is not None
        low = Lowering()
        low.launch(tensor_scatter, [In(0), In(1), In(2) if has_idx else In(0)], Out(0),
                   axis=axis, circular=circular, has_idx=has_idx)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(14)
        past = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
        upd = rng.standard_normal((2, 3, 2, 4)).astype(np.float32)
        return [
            OpCase("linear", [past, upd, np.array([1, 4], np.int64)]),
            OpCase("no_indices", [past, upd]),
            OpCase("circular", [past, upd, np.array([5, 2], np.int64)], {"mode": "circular"}),
            OpCase("axis_last", [past, rng.standard_normal((2, 3, 6, 2)).astype(np.float32),
                                 np.array([0, 2], np.int64)], {"axis": -1}),
        ]


# -------------------------------------------------------------------------------- MaxUnpool


class MaxUnpool(OpDef):
    """Scatter pooled values back to their argmax positions (host: a scatter)."""

    op_type = "MaxUnpool"
    since_version = 9
    host_only = True
    value_inputs = (2,)

    def _inferred(self, node: Node, x_shape) -> list:
        """The default output shape from kernel_shape, pads and strides."""
        k = list(self.attr(node, "kernel_shape", required=True))
        nd = len(k)
        pads = list(self.attr(node, "pads", [0] * 2 * nd))
        strides = list(self.attr(node, "strides", [1] * nd))
        return [x_shape[0], x_shape[1], *(
            (x_shape[2 + d] - 1) * strides[d] - pads[d] - pads[d + nd] + k[d]
            if isinstance(x_shape[2 + d], int) else None for d in range(nd))]

    def _shape(self, node: Node, x_shape, values) -> list | None:
        given = input_ints(self, node, values, 2)
        if given is not None:
            return given
        if len(node.inputs) > 2 and node.inputs[2]:
            return None  # an output_shape input whose value is not known yet
        return self._inferred(node, x_shape)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(inputs) < 2 or inputs[1] is None:
            raise self.fail(node, "inputs X (known rank) and I are required")
        shape = self._shape(node, x.shape, values)
        return [TensorInfo(x.dtype, None if shape is None else tuple(shape))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, idx = np.asarray(inputs[0]), np.asarray(inputs[1]).reshape(-1)
        # Indices address the default (inferred) output; an explicit output_shape pads it
        # at the end of each axis (onnx.reference and ONNX Runtime).
        inferred = self._inferred(node, x.shape)
        shape = self._shape(node, x.shape, [None, None, *inputs[2:3]])
        size = int(np.prod(inferred))
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise self.fail(node, f"indices fall outside the output of {size} elements")
        y = np.zeros(size, x.dtype)
        y[idx] = x.reshape(-1)
        out = np.zeros(shape, x.dtype)
        keep = tuple(slice(0, min(a, b)) for a, b in zip(inferred, shape))
        out[keep] = y.reshape(inferred)[keep]
        return [out]

    def cases(self) -> list[OpCase]:
        x = np.array([[[[5, 6], [7, 8]]]], np.float32)
        i = np.array([[[[5, 7], [13, 15]]]], np.int64)
        attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
        return [
            OpCase("inferred_shape", [x, i], attrs),
            OpCase("output_shape", [x, i, np.array([1, 1, 5, 5], np.int64)], attrs),
        ]


# -------------------------------------------------------------------------------------- Det


class Det(OpDef):
    """Determinants of the trailing square matrices (host: LU with pivoting)."""

    op_type = "Det"
    since_version = 11
    host_only = True

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(x.shape) < 2:
            raise self.fail(node, "input must have rank >= 2 ([..., M, M])")
        if x.dtype not in FLOATS:
            raise self.fail(node, f"dtype {x.dtype} is not a float type")
        m, n = x.shape[-2:]
        if isinstance(m, int) and isinstance(n, int) and m != n:
            raise self.fail(node, f"matrices must be square, got {m}x{n}")
        return [TensorInfo(x.dtype, tuple(x.shape[:-2]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(15)
        return [
            OpCase("2d", [rng.standard_normal((3, 3)).astype(np.float32)], atol=1e-5),
            OpCase("batched", [rng.standard_normal((2, 2, 4, 4)).astype(np.float32)],
                   atol=1e-4, rtol=1e-4),
            OpCase("singular", [np.ones((2, 2), np.float32)]),
        ]


OPS: list[type[OpDef]] = [TensorScatter, MaxUnpool, Det]
