"""Convolution: Conv and ConvTranspose (1-D/2-D/3-D, groups, dilations, pads/auto_pad).

Both are gather-style: one output element loops over (input channel of its group, kz, ky,
kx). ConvTranspose gathers too: output position o takes input i where
``o + pad - k * dilation == i * stride``, so no scatter is needed.
"""


from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.kernel import Helper, Output, Tensor, cast, f32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import static_shape
from .conv_common import (
    Window,
    array_infos,
    auto_pad_attr,
    ints_attr,
    pad3,
    sliding_windows,
    spatial_index,
    spatial_input,
    window,
)
from .fused import IN_KERNEL, activation_args, apply_activation


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


@kernel
def conv_pointwise(
    x: Tensor, w: Tensor, b: Tensor, out: Output, groups: int, has_bias: bool, act: Helper,
    act_params: tuple, act_arity: int,
):
    """A 1x1 convolution with unit strides and no padding, x viewed (N, C, P), w (M, C/group)
    and out (N, M, P) for P spatial positions: a matrix product per group, whose register
    tile vectorises along P however narrow the image rows are."""
    n, co, p = out.index
    cin_g = w.shape[1]
    c0 = (co // (out.shape[1] // groups)) * cin_g if groups > 1 else 0
    acc = 0.0
    for ci in range(cin_g):
        acc = acc + cast(x[n, c0 + ci, p], f32) * cast(w[co, ci], f32)
    if has_bias:
        acc = acc + cast(b.flat[co], f32)
    return cast(apply_activation(acc, act, act_params, act_arity), out.dtype)


@kernel
def conv_nd(
    x: Tensor, w: Tensor, b: Tensor, out: Output, nsp: int, xsp: tuple, xst: tuple,
    wst: tuple, ksp: tuple, strides: tuple, pads: tuple, dil: tuple, groups: int,
    has_bias: bool, act: Helper, act_params: tuple, act_arity: int,
):
    """Conv over three (left-padded) spatial dims; x (N, C, ...), w (M, C/group, k...)."""
    n = out.index[0]
    co = out.index[1]
    oz = spatial_index(out, 0, nsp)
    oy = spatial_index(out, 1, nsp)
    ox = spatial_index(out, 2, nsp)
    cin_g = w.shape[1]
    # groups == 1 keeps the channel base affine (strided views on cpu).
    g = co // (out.shape[1] // groups) if groups > 1 else 0
    xb = n * x.strides[0] + g * cin_g * x.strides[1]
    wb = co * w.strides[0]
    acc = 0.0
    for ci in range(cin_g):
        for kz in range(ksp[0]):
            iz = oz * strides[0] - pads[0] + kz * dil[0]
            for ky in range(ksp[1]):
                iy = oy * strides[1] - pads[1] + ky * dil[1]
                for kx in range(ksp[2]):
                    ix = ox * strides[2] - pads[2] + kx * dil[2]
                    # The weight is read outside the padding test: it does not depend on the
                    # output position, so a register tile along x/y shares it.
                    wo = wb + ci * w.strides[1] + kz * wst[0] + ky * wst[1] + kx * wst[2]
                    wv = w.flat[wo]
                    # A padded tap is the value 0 times the weight (NaN for an infinite
                    # weight, as onnxruntime and onnx.reference), not a skipped term.
                    xv = 0.0
                    if 0 <= iz < xsp[0] and 0 <= iy < xsp[1] and 0 <= ix < xsp[2]:
                        xo = xb + ci * x.strides[1] + iz * xst[0] + iy * xst[1] + ix * xst[2]
                        xv = cast(x.flat[xo], f32)
                    acc = acc + xv * cast(wv, f32)
    if has_bias:
        acc = acc + cast(b.flat[co], f32)
    return cast(apply_activation(acc, act, act_params, act_arity), out.dtype)


@kernel
def conv_transpose_nd(
    x: Tensor, w: Tensor, b: Tensor, out: Output, nsp: int, xsp: tuple, xst: tuple,
    wst: tuple, ksp: tuple, strides: tuple, pads: tuple, dil: tuple, groups: int,
    has_bias: bool, act: Helper, act_params: tuple, act_arity: int,
):
    """ConvTranspose; x (N, C, ...), w (C, M/group, k...), out (N, M, ...)."""
    n = out.index[0]
    co = out.index[1]
    oz = spatial_index(out, 0, nsp) + pads[0]
    oy = spatial_index(out, 1, nsp) + pads[1]
    ox = spatial_index(out, 2, nsp) + pads[2]
    cout_g = w.shape[1]
    cin_g = x.shape[1] // groups
    g = co // cout_g if groups > 1 else 0
    xb = n * x.strides[0] + g * cin_g * x.strides[1]
    wb = g * cin_g * w.strides[0] + (co - g * cout_g) * w.strides[1]
    acc = 0.0
    for ci in range(cin_g):
        for kz in range(ksp[0]):
            tz = oz - kz * dil[0]
            iz = tz if strides[0] == 1 else tz // strides[0]
            for ky in range(ksp[1]):
                ty = oy - ky * dil[1]
                iy = ty if strides[1] == 1 else ty // strides[1]
                for kx in range(ksp[2]):
                    tx = ox - kx * dil[2]
                    ix = tx if strides[2] == 1 else tx // strides[2]
                    if (
                        0 <= tz and 0 <= ty and 0 <= tx
                        and iz < xsp[0] and iy < xsp[1] and ix < xsp[2]
                        and iz * strides[0] == tz and iy * strides[1] == ty
                        and ix * strides[2] == tx
                    ):
                        xo = xb + ci * x.strides[1] + iz * xst[0] + iy * xst[1] + ix * xst[2]
                        wo = wb + ci * w.strides[0] + kz * wst[0] + ky * wst[1] + kx * wst[2]
                        xv = x.flat[xo]
                        wv = w.flat[wo]
                        acc = acc + cast(xv, f32) * cast(wv, f32)
    if has_bias:
        acc = acc + cast(b.flat[co], f32)
    return cast(apply_activation(acc, act, act_params, act_arity), out.dtype)


class _ConvBase(OpDef):
    """Shared checks of Conv and ConvTranspose; both apply a fused activation in-kernel."""

    since_version = 1
    fusable_activations = IN_KERNEL

    def _weights(self, node: Node, inputs: Sequence[TensorInfo | None]):
        x_shape = spatial_input(self, node, inputs[0])
        w = inputs[1] if len(inputs) > 1 else None
        if w is None or not w.is_static:
            raise self.fail(node, "input 1 (W) is required with a static shape")
        if w.dtype != inputs[0].dtype:  # type: ignore[union-attr]
            raise self.fail(node, f"W dtype {w.dtype} differs from X dtype {inputs[0].dtype}")  # type: ignore[union-attr]
        w_shape = static_shape(w)
        if len(w_shape) != len(x_shape):
            raise self.fail(node, f"W rank {len(w_shape)} differs from X rank {len(x_shape)}")
        group = int(self.attr(node, "group", 1))
        if group < 1:
            raise self.fail(node, f"attribute 'group' = {group} must be >= 1")
        kernel_shape = ints_attr(self, node, "kernel_shape", len(x_shape) - 2, 0, minimum=1) \
            if "kernel_shape" in node.attrs else w_shape[2:]
        if tuple(kernel_shape) != tuple(w_shape[2:]):
            raise self.fail(node, f"attribute 'kernel_shape' = {list(kernel_shape)} does not "
                                  f"match W's spatial shape {list(w_shape[2:])}")
        b = inputs[2] if len(inputs) > 2 else None
        if b is not None and (b.dtype != w.dtype or b.shape is None or len(b.shape) != 1):
            raise self.fail(node, f"B must be a 1-D {w.dtype} tensor, got {b}")
        return x_shape, w_shape, group, b

    def _lower(self, node, inputs, outputs, kern, win: Window, pads_begin) -> Lowering:
        x_shape = static_shape(inputs[0])
        w_shape = static_shape(inputs[1])
        nsp = len(x_shape) - 2
        has_bias = len(inputs) > 2 and inputs[2] is not None
        low = Lowering()
        low.launch(
            kern, [In(0), In(1), In(2) if has_bias else In(1)], Out(0),
            nsp=nsp,
            xsp=pad3(x_shape[2:], 1),
            xst=pad3(_row_major(x_shape)[2:], 0),
            wst=pad3(_row_major(w_shape)[2:], 0),
            ksp=pad3(win.kernel, 1),
            strides=pad3(win.strides, 1),
            pads=pad3(pads_begin, 0),
            dil=pad3(win.dilations, 1),
            groups=int(self.attr(node, "group", 1)),
            has_bias=has_bias,
            **activation_args(node),
        )
        return low


class Conv(_ConvBase):
    op_type = "Conv"

    def _window(self, node: Node, inputs) -> tuple[tuple[int, ...], Window]:
        x_shape, w_shape, group, b = self._weights(node, inputs)
        if x_shape[1] != w_shape[1] * group or w_shape[0] % group:
            raise self.fail(node, f"channels do not match: X {x_shape}, W {w_shape}, "
                                  f"attribute 'group' = {group}")
        if b is not None and b.shape[0] != w_shape[0]:
            raise self.fail(node, f"B has {b.shape[0]} values, expected {w_shape[0]}")
        return (x_shape[0], w_shape[0]), window(self, node, x_shape[2:], w_shape[2:])

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        nm, win = self._window(node, inputs)
        return [TensorInfo(inputs[0].dtype, (*nm, *win.out))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, w = inputs[0], inputs[1]
        b = inputs[2] if len(inputs) > 2 else None
        _, win = self._window(node, array_infos(inputs))
        group = int(self.attr(node, "group", 1))
        cols = sliding_windows(x.astype(np.float64), win, 0.0)  # (N, C, *out, *k)
        n, c = x.shape[:2]
        nsp = x.ndim - 2
        p, k = int(np.prod(win.out)), int(np.prod(win.kernel))
        cols = cols.reshape(n, group, c // group, p, k)
        wg = w.astype(np.float64).reshape(group, w.shape[0] // group, c // group, k)
        y = np.einsum("ngcpk,gmck->ngmp", cols, wg).reshape(n, w.shape[0], *win.out)
        if b is not None:
            y = y + b.astype(np.float64).reshape(-1, *([1] * nsp))
        return [y.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        _, win = self._window(node, inputs)
        x_shape, w_shape = static_shape(inputs[0]), static_shape(inputs[1])
        if (all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
                and not any(win.pads_begin) and len(x_shape) > 2
                and tuple(outputs[0].shape[2:]) == tuple(x_shape[2:])):
            return self._lower_pointwise(node, inputs, x_shape, w_shape)
        return self._lower(node, inputs, outputs, conv_nd, win, win.pads_begin)

    def _lower_pointwise(self, node, inputs, x_shape, w_shape) -> Lowering:
        """A 1x1 convolution as a product over flat spatial positions (``conv_pointwise``)."""
        p = int(np.prod(x_shape[2:]))
        has_bias = len(inputs) > 2 and inputs[2] is not None
        low = Lowering()
        low.launch_viewed(
            conv_pointwise, [In(0), In(1), In(2) if has_bias else In(1)], Out(0),
            [(x_shape[0], x_shape[1], p), (w_shape[0], w_shape[1]), None,
             (x_shape[0], w_shape[0], p)],
            groups=int(self.attr(node, "group", 1)), has_bias=has_bias,
            **activation_args(node),
        )
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(0)

        def r(*s):
            return rng.standard_normal(s).astype(np.float32)

        cases = [
            OpCase("conv1d_bias", [r(2, 3, 9), r(4, 3, 3), r(4)]),
            OpCase("conv2d_pads_strides", [r(1, 2, 7, 6), r(3, 2, 3, 3)],
                   {"pads": (1, 0, 2, 1), "strides": (2, 1)}),
            OpCase("conv2d_dilations", [r(1, 2, 8, 8), r(2, 2, 3, 2)], {"dilations": (2, 3)}),
            OpCase("conv2d_groups", [r(2, 4, 5, 5), r(6, 2, 3, 3), r(6)],
                   {"group": 2, "pads": (1, 1, 1, 1)}),
            OpCase("conv2d_depthwise", [r(1, 3, 6, 6), r(3, 1, 3, 3)],
                   {"group": 3, "strides": (2, 2), "auto_pad": "SAME_UPPER"}),
            OpCase("conv2d_same_lower", [r(1, 2, 5, 6), r(2, 2, 2, 3)],
                   {"auto_pad": "SAME_LOWER", "strides": (2, 2)}),
            OpCase("conv2d_valid", [r(1, 1, 5, 5), r(1, 1, 2, 2)], {"auto_pad": "VALID",
                                                                      "strides": (2, 2)}),
            OpCase("conv3d", [r(1, 2, 4, 5, 3), r(2, 2, 2, 3, 2), r(2)],
                   {"pads": (1, 0, 1, 0, 1, 1)}),
            OpCase("conv2d_1x1_size1", [r(1, 1, 1, 1), r(1, 1, 1, 1)]),
            OpCase("conv2d_f16", [r(1, 2, 5, 5).astype(np.float16),
                                  r(2, 2, 3, 3).astype(np.float16)], rtol=5e-3, atol=5e-3),
        ]
        nan = r(1, 1, 4, 4)
        nan[0, 0, 0, 0], nan[0, 0, 3, 3] = np.nan, np.inf
        cases.append(OpCase("conv2d_nan_inf", [nan, r(1, 1, 2, 2)]))
        return cases


class ConvTranspose(_ConvBase):
    op_type = "ConvTranspose"

    def _geometry(self, node: Node, inputs) -> tuple[tuple[int, ...], Window]:
        x_shape, w_shape, group, b = self._weights(node, inputs)
        if x_shape[1] != w_shape[0] or w_shape[0] % group:
            raise self.fail(node, f"channels do not match: X {x_shape}, W {w_shape}, "
                                  f"attribute 'group' = {group}")
        m = w_shape[1] * group
        if b is not None and b.shape[0] != m:
            raise self.fail(node, f"B has {b.shape[0]} values, expected {m}")
        nsp = len(x_shape) - 2
        ins, ks = x_shape[2:], w_shape[2:]
        strides = ints_attr(self, node, "strides", nsp, 1, minimum=1)
        dil = ints_attr(self, node, "dilations", nsp, 1, minimum=1)
        opad = ints_attr(self, node, "output_padding", nsp, 0, minimum=0)
        if any(p >= max(s, d) for p, s, d in zip(opad, strides, dil)):
            raise self.fail(node, f"attribute 'output_padding' = {list(opad)} must be smaller "
                                  "than the strides or dilations")
        mode = auto_pad_attr(self, node)
        full = [s * (i - 1) + p + (k - 1) * d + 1 for s, i, p, k, d in
                zip(strides, ins, opad, ks, dil)]
        shape_attr = self.attr(node, "output_shape")
        if shape_attr is not None or mode in ("SAME_UPPER", "SAME_LOWER"):
            if shape_attr is not None:
                target = [int(v) for v in shape_attr][-nsp:]
                if len(shape_attr) not in (nsp, nsp + 2):
                    raise self.fail(node, f"attribute 'output_shape' = {list(shape_attr)} "
                                          f"needs {nsp} spatial sizes")
            else:
                target = [i * s for i, s in zip(ins, strides)]
            # A target beyond the full output (negative total) extends it with zeros + bias.
            total = [f - t for f, t in zip(full, target)]
            small = tuple(t // 2 for t in total)
            large = tuple(t - t // 2 for t in total)
            begin, end = (small, large) if mode == "SAME_UPPER" else (large, small)
        else:
            pads = ints_attr(self, node, "pads", 2 * nsp, 0, minimum=0)
            begin, end = pads[:nsp], pads[nsp:]
        out = tuple(f - a - z for f, a, z in zip(full, begin, end))
        if any(o < 1 for o in out):
            raise self.fail(node, f"pads {list(begin) + list(end)} leave an empty output")
        return (x_shape[0], m), Window(tuple(ks), strides, dil, tuple(begin), tuple(end), out)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        nm, win = self._geometry(node, inputs)
        return [TensorInfo(inputs[0].dtype, (*nm, *win.out))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, w = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
        b = inputs[2] if len(inputs) > 2 else None
        (n, m), win = self._geometry(node, array_infos(inputs))
        group = int(self.attr(node, "group", 1))
        nsp = x.ndim - 2
        c = x.shape[1]
        cg, mg = c // group, m // group
        ins = x.shape[2:]
        # Scatter every kernel tap into a canvas large enough for all pads, then crop.
        full = [s * (i - 1) + k_ext for s, i, k_ext in zip(win.strides, ins, win.extent)]
        lead = [max(0, -p) for p in win.pads_begin]  # room for negative begin pads
        canvas = [lead[d] + max(f, win.pads_begin[d] + win.out[d]) for d, f in enumerate(full)]
        y = np.zeros((n, m, *canvas))
        xg = x.reshape(n, group, cg, *ins)
        wg = w.reshape(group, cg, mg, *win.kernel)
        for tap in np.ndindex(*win.kernel):
            contrib = np.einsum("ngc...,gcm->ngm...", xg, wg[(slice(None),) * 3 + tap])
            sl = tuple(
                slice(lead[d] + tap[d] * win.dilations[d],
                      lead[d] + tap[d] * win.dilations[d] + (ins[d] - 1) * win.strides[d] + 1,
                      win.strides[d])
                for d in range(nsp)
            )
            y[(slice(None), slice(None), *sl)] += contrib.reshape(n, m, *ins)
        crop = tuple(slice(lead[d] + win.pads_begin[d], lead[d] + win.pads_begin[d] + win.out[d])
                     for d in range(nsp))
        y = y[(slice(None), slice(None), *crop)]
        if b is not None:
            y = y + b.astype(np.float64).reshape(-1, *([1] * nsp))
        return [y.astype(inputs[0].dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        _, win = self._geometry(node, inputs)
        return self._lower(node, inputs, outputs, conv_transpose_nd, win, win.pads_begin)

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(1)

        def r(*s):
            return rng.standard_normal(s).astype(np.float32)

        return [
            OpCase("convT1d_bias", [r(2, 3, 5), r(3, 2, 3), r(2)]),
            OpCase("convT2d_strides_pads", [r(1, 2, 4, 3), r(2, 3, 3, 3)],
                   {"strides": (2, 3), "pads": (1, 0, 0, 2)}),
            OpCase("convT2d_output_padding", [r(1, 1, 3, 3), r(1, 2, 3, 3)],
                   {"strides": (3, 2), "output_padding": (1, 1)}),
            OpCase("convT2d_output_shape", [r(1, 1, 3, 3), r(1, 2, 3, 3)],
                   {"strides": (3, 2), "output_shape": (10, 8)}),
            OpCase("convT2d_same_upper", [r(1, 1, 3, 4), r(1, 1, 3, 3)],
                   {"strides": (2, 2), "auto_pad": "SAME_UPPER"}),
            OpCase("convT2d_same_lower", [r(1, 1, 3, 4), r(1, 1, 2, 3)],
                   {"strides": (2, 2), "auto_pad": "SAME_LOWER"}),
            OpCase("convT2d_dilations_groups", [r(1, 4, 3, 3), r(4, 1, 2, 2), r(2)],
                   {"dilations": (2, 2), "group": 2}),
            OpCase("convT3d", [r(1, 1, 2, 3, 2), r(1, 2, 2, 2, 2)], {"strides": (1, 2, 1)}),
            OpCase("convT2d_size1", [r(1, 1, 1, 1), r(1, 1, 1, 1)]),
        ]


OPS: list[type[OpDef]] = [Conv, ConvTranspose]
