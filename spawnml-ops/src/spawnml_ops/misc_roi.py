"""RoiAlign and DeformConv: region pooling and deformable convolution by bilinear sampling.

Both are computed on the host (``host_only``): their sample positions come from tensor
values (rois, offsets) and each output reads a data-dependent, unbounded set of pixels.
The semantics follow onnx.reference (which follows the ONNX Runtime / torchvision kernels).
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import Node, OpCase, OpDef, TensorInfo

FLOATS = (DType.float32, DType.float16, DType.float64)


def _str(op: OpDef, node: Node, name: str, default: str) -> str:
    v = op.attr(node, name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def bilinear_zeros(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sample ``img`` (C, H, W) at pixel coordinates y, x (same shape S): (C, *S); corners
    outside the image read 0."""
    h, w = img.shape[1:]
    y0, x0 = np.floor(y), np.floor(x)
    acc = np.zeros((img.shape[0], *y.shape))
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            wt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
            ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            yi = np.clip(yy, 0, h - 1).astype(np.int64)
            v = img[:, yi, np.clip(xx, 0, w - 1).astype(np.int64)]
            acc += np.where(ok, wt, 0.0) * v
    return acc


# ------------------------------------------------------------------------------- RoiAlign


def _roi_taps(y: np.ndarray, x: np.ndarray, h: int, w: int):
    """ONNX Runtime's RoiAlign bilinear taps: four (flat index, weight) pairs per sample."""
    outside = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    y, x = np.maximum(y, 0.0), np.maximum(x, 0.0)
    y_low, x_low = y.astype(np.int64), x.astype(np.int64)
    y_edge, x_edge = y_low >= h - 1, x_low >= w - 1
    y_low = np.where(y_edge, h - 1, y_low)
    x_low = np.where(x_edge, w - 1, x_low)
    y_high = np.where(y_edge, h - 1, y_low + 1)
    x_high = np.where(x_edge, w - 1, x_low + 1)
    ly = np.where(y_edge, 0.0, y - y_low)
    lx = np.where(x_edge, 0.0, x - x_low)
    hy, hx = 1 - ly, 1 - lx
    keep = ~outside
    return [(np.where(keep, yi * w + xi, 0), np.where(keep, wt, 0.0))
            for yi, xi, wt in ((y_low, x_low, hy * hx), (y_low, x_high, hy * lx),
                               (y_high, x_low, ly * hx), (y_high, x_high, ly * lx))]


class RoiAlign(OpDef):
    op_type = "RoiAlign"
    since_version = 10
    host_only = True
    # roi sizes become sample counts (sampling_ratio 0): NaN/±Inf/1e10 corners are
    # out-of-range conversions (onnx.reference allocates tens of GB on them)
    edge_unspecified_inputs = (1,)

    def _check(self, node: Node, inputs) -> tuple[int, int]:
        x, rois, idx = (list(inputs) + [None] * 3)[:3]
        if x is None or rois is None or idx is None:
            raise self.fail(node, "inputs X, rois and batch_indices are required")
        if x.dtype not in FLOATS or x.shape is None or len(x.shape) != 4:
            raise self.fail(node, f"X must be a 4-D float tensor, got {x.dtype} {x.shape}")
        if rois.shape is not None and (len(rois.shape) != 2 or rois.shape[1] not in (4, None)):
            raise self.fail(node, f"rois must be (num_rois, 4), got {rois.shape}")
        mode = _str(self, node, "mode", "avg")
        if mode not in ("avg", "max"):
            raise self.fail(node, f"attribute 'mode' = {mode!r} must be 'avg' or 'max'")
        return int(self.attr(node, "output_height", 1)), int(self.attr(node, "output_width", 1))

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        oh, ow = self._check(node, inputs)
        x, rois = inputs[0], inputs[1]
        n = rois.shape[0] if rois.shape is not None else None
        return [TensorInfo(x.dtype, (n, x.shape[1], oh, ow))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        oh, ow = self._check(node, array_infos(inputs))
        x, rois, batch = (np.asarray(a) for a in inputs[:3])
        _, c, h, w = x.shape
        scale = float(self.attr(node, "spatial_scale", 1.0))
        ratio = int(self.attr(node, "sampling_ratio", 0))
        default_ctm = "half_pixel" if node.opset >= 16 else "output_half_pixel"
        half = _str(self, node, "coordinate_transformation_mode", default_ctm) == "half_pixel"
        is_max = _str(self, node, "mode", "avg") == "max"
        out = np.zeros((rois.shape[0], c, oh, ow))
        for r in range(rois.shape[0]):
            x0, y0, x1, y1 = (float(v) * scale - (0.5 if half else 0.0) for v in rois[r])
            rw, rh = x1 - x0, y1 - y0
            if not half:  # malformed ROIs are forced to 1x1
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            bh, bw = rh / oh, rw / ow
            gh = ratio if ratio > 0 else int(np.ceil(rh / oh))
            gw = ratio if ratio > 0 else int(np.ceil(rw / ow))
            count = max(gh * gw, 1)
            # sample grid: (oh, gh) x (ow, gw)
            ys = y0 + np.arange(oh)[:, None] * bh + (np.arange(gh)[None] + 0.5) * bh / gh
            xs = x0 + np.arange(ow)[:, None] * bw + (np.arange(gw)[None] + 0.5) * bw / gw
            yy = np.broadcast_to(ys[:, None, :, None], (oh, ow, gh, gw))
            xx = np.broadcast_to(xs[None, :, None, :], (oh, ow, gh, gw))
            img = x[int(batch[r])].reshape(c, h * w).astype(np.float64)
            terms = [img[:, pos] * wt for pos, wt in _roi_taps(yy, xx, h, w)]
            if is_max:
                val = np.max(np.maximum.reduce(terms), axis=(3, 4)) if gh * gw else 0.0
            else:
                val = np.sum(sum(terms), axis=(3, 4)) / count
            out[r] = val
        return [out.astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(9)
        x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
        rois = np.array([[0, 0, 4, 4], [1.5, 0.5, 6.5, 5.2], [3, 2, 2.5, 4]], np.float32)
        idx = np.array([0, 1, 1], np.int64)
        attrs = {"output_height": 3, "output_width": 2, "spatial_scale": 0.9}
        return [
            OpCase("avg_half_pixel", [x, rois, idx], attrs, atol=1e-5),
            OpCase("avg_output_half_pixel", [x, rois, idx],
                   {**attrs, "coordinate_transformation_mode": "output_half_pixel",
                    "sampling_ratio": 2}, atol=1e-5),
            OpCase("max", [x, rois, idx], {**attrs, "mode": "max"}, atol=1e-5),
        ]


# ----------------------------------------------------------------------------- DeformConv


class DeformConv(OpDef):
    """2-D deformable convolution (offsets and optional mask per kernel tap)."""

    op_type = "DeformConv"
    since_version = 19
    host_only = True

    def _attrs(self, node: Node, w_shape) -> tuple:
        k = list(self.attr(node, "kernel_shape", w_shape[2:]))
        dil = list(self.attr(node, "dilations", [1, 1]))
        st = list(self.attr(node, "strides", [1, 1]))
        pads = list(self.attr(node, "pads", [0, 0, 0, 0]))
        group, og = int(self.attr(node, "group", 1)), int(self.attr(node, "offset_group", 1))
        return k, dil, st, pads, group, og

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x, w, off = (list(inputs) + [None] * 3)[:3]
        if x is None or w is None or off is None:
            raise self.fail(node, "inputs X, W and offset are required")
        if x.shape is None or len(x.shape) != 4 or w.shape is None or off.shape is None:
            raise self.fail(node, "only 2-D DeformConv (4-D X, W, offset) is supported")
        k, _dil, _st, _pads, group, og = self._attrs(node, w.shape)
        if isinstance(x.shape[1], int) and isinstance(w.shape[1], int) and \
                x.shape[1] != w.shape[1] * group:
            raise self.fail(node, f"X has {x.shape[1]} channels, W expects {w.shape[1]} x "
                                  f"group {group}")
        if isinstance(off.shape[1], int) and off.shape[1] != og * 2 * k[0] * k[1]:
            raise self.fail(node, f"offset has {off.shape[1]} channels, expected "
                                  f"{og * 2 * k[0] * k[1]}")
        return [TensorInfo(x.dtype, (x.shape[0], w.shape[0], *off.shape[2:]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, w, off = (np.asarray(a) for a in inputs[:3])
        b = inputs[3] if len(inputs) > 3 else None
        mask = inputs[4] if len(inputs) > 4 else None
        (kh, kw), (dh, dw), (sh, sw), pads, group, og = self._attrs(node, w.shape)
        n, c = x.shape[:2]
        oc = w.shape[0]
        oh, ow = off.shape[2:]
        off = off.reshape(n, og, kh, kw, 2, oh, ow).astype(np.float64)
        m = (np.ones((n, og, kh, kw, oh, ow)) if mask is None
             else np.asarray(mask, np.float64).reshape(n, og, kh, kw, oh, ow))
        base_y = (-pads[0] + sh * np.arange(oh))[None, None, :, None] + \
            (dh * np.arange(kh))[:, None, None, None]
        base_x = (-pads[1] + sw * np.arange(ow))[None, None, None, :] + \
            (dw * np.arange(kw))[None, :, None, None]
        cpo = c // og
        cols = np.zeros((n, c, kh, kw, oh, ow))
        for i in range(n):
            for g in range(og):
                ch = slice(g * cpo, (g + 1) * cpo)
                y = base_y + off[i, g, :, :, 0]
                xx = base_x + off[i, g, :, :, 1]
                cols[i, ch] = bilinear_zeros(x[i, ch].astype(np.float64), y, xx) * m[i, g]
        cpg, opg = c // group, oc // group
        out = np.zeros((n, oc, oh, ow))
        for g in range(group):
            out[:, g * opg:(g + 1) * opg] = np.einsum(
                "ncklhw,ockl->nohw", cols[:, g * cpg:(g + 1) * cpg],
                w[g * opg:(g + 1) * opg].astype(np.float64))
        if b is not None:
            out += np.asarray(b, np.float64).reshape(1, -1, 1, 1)
        return [out.astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(10)
        x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
        w = rng.standard_normal((2, 2, 2, 2)).astype(np.float32)
        off = rng.uniform(-1.5, 1.5, (1, 16, 5, 5)).astype(np.float32)
        mask = rng.random((1, 8, 5, 5)).astype(np.float32)
        b = rng.standard_normal(2).astype(np.float32)
        attrs = {"group": 2, "offset_group": 2, "pads": [1, 1, 0, 0], "strides": [1, 1]}
        return [
            OpCase("groups_mask_bias", [x, w, off, b, mask], attrs, atol=1e-5),
            OpCase("plain", [x[:, :2], w, off[:, :8, :4, :4]], atol=1e-5),
        ]
