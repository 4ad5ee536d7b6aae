"""Transformer-block ops of the attention family: RMSNormalization, RotaryEmbedding and
SwiGLU (single gather kernels, RMSNormalization reusing the normalisation apply pass), plus
the recurrent ops of ``attention_recurrent``."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, cast_like, f32, helper, i32, kernel, static_range
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .attention_recurrent import OPS as RECURRENT_OPS
from .common import binary_map_params, normalize_axis, static_shape
from .conv_common import FLOATS, array_infos
from .norm_kernels import PARAM_BROADCAST, apply_consts, norm_apply, split_axes, stats_consts


def _rand(seed: int, *shape: int, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _float_input(op: OpDef, node: Node, inputs, i: int, name: str) -> tuple[int, ...]:
    info = inputs[i] if len(inputs) > i else None
    if info is None:
        raise op.fail(node, f"input {i} ({name}) is required")
    if info.dtype not in FLOATS:
        raise op.fail(node, f"input {name} has dtype {info.dtype} (float types only)")
    if not info.is_static:
        raise op.fail(node, f"input {name} needs a static shape, got {info.shape}")
    return static_shape(info)


# ------------------------------------------------------------------ RMSNormalization


@kernel
def rms_stats(
    x: Tensor, out: Output, keep_size: tuple, keep_stride: tuple, keep_div: tuple,
    red_size: tuple, red_stride: tuple, count: int, eps: float, eps_outside_sqrt: bool,
):
    """out[r, 0] = 0, out[r, 1] = 1 / sqrt(mean(x^2) + eps) (``norm_apply``'s layout)."""
    r = out.index[0]
    base = 0
    for d in static_range(len(keep_size)):
        base = base + ((r // keep_div[d]) % keep_size[d]) * keep_stride[d]
    q = 0.0
    for r0 in range(red_size[0]):
        for r1 in range(red_size[1]):
            for r2 in range(red_size[2]):
                v = cast(x.flat[base + r0 * red_stride[0] + r1 * red_stride[1]
                                + r2 * red_stride[2]], f32)
                q = q + v * v
    inv = 1.0 / sqrt(q / cast(count, f32) + eps)
    return 0.0 if out.index[1] == 0 else inv


class RMSNormalization(OpDef):
    """x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale (stash_type 1)."""

    op_type = "RMSNormalization"
    since_version = 23

    def _check(self, node: Node, inputs) -> tuple[tuple[int, ...], int]:
        shape = _float_input(self, node, inputs, 0, "X")
        scale = _float_input(self, node, inputs, 1, "scale")
        axis = normalize_axis(node, int(self.attr(node, "axis", -1)), len(shape))
        if int(self.attr(node, "stash_type", 1)) != 1:
            raise UnsupportedOpError(f"{node.describe()}: attribute 'stash_type' = "
                                     f"{self.attr(node, 'stash_type')} (only 1, float32)")
        if tuple(np.broadcast_shapes(scale, shape)) != shape:
            raise self.fail(node, f"scale {scale} does not broadcast to X {shape}")
        return shape, axis

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x, w = inputs[:2]
        _, axis = self._check(node, array_infos(inputs))
        t = x.astype(np.float32)
        ms = np.mean(t * t, axis=tuple(range(axis, x.ndim)), keepdims=True)
        eps = float(self.attr(node, "epsilon", 1e-5))
        return [(t / np.sqrt(ms + eps) * w.astype(np.float32)).astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        shape, axis = self._check(node, inputs)
        kept, red = split_axes(node, shape, range(axis, len(shape)))
        rows = int(np.prod([n for n, _ in kept])) if kept else 1
        low = Lowering()
        stats = low.temp(DType.float32, (rows, 2))
        low.launch(rms_stats, [In(0)], stats,
                   **stats_consts(kept, red, float(self.attr(node, "epsilon", 1e-5))))
        low.launch(norm_apply, [In(0), stats, In(1), In(1)], Out(0),
                   **apply_consts(kept, param_mode=PARAM_BROADCAST, param_div=1, param_mod=1,
                                  has_bias=False, center=False, divide=True,
                                  scale_normalized=False))
        return low

    def cases(self) -> list[OpCase]:
        x = _rand(0, 2, 3, 4)
        return [
            OpCase("last_axis", [x, _rand(1, 4)], rtol=1e-5),
            OpCase("axis1", [x, _rand(2, 3, 4)], {"axis": 1, "epsilon": 0.1}),
            OpCase("axis0_full_scale", [x, _rand(3, 2, 3, 4)], {"axis": 0}),
            OpCase("scale_broadcast", [x, _rand(4, 1, 4)], {"axis": -2}),
            OpCase("f16", [x.astype(np.float16), _rand(5, 4, dtype=np.float16)],
                   rtol=2e-3, atol=2e-3),
        ]


# ------------------------------------------------------------------ RotaryEmbedding


@kernel
def rotary(
    x: Tensor, cos: Tensor, sin: Tensor, pos: Tensor, out: Output, head: int, rot: int,
    interleaved: bool, has_pos: bool, seq: int,
):
    """Rotate the first ``rot`` features of each head by the cached angles of its position
    (pairs (d, d + rot/2), or (2k, 2k + 1) when ``interleaved``)."""
    b = out.index[0]
    s = 0
    d = 0
    if out.ndim == 4:
        s = out.index[2]
        d = out.index[3]
    else:
        s = out.index[1]
        d = out.index[2] % head
    v = x.flat[out.flat]
    if d >= rot:
        return v
    half = rot // 2
    k = 0
    first = True
    lo = 0  # offset of the pair's first element relative to this one
    if interleaved:
        k = d // 2
        first = d % 2 == 0
        lo = 0 if first else -1
        hi = lo + 1
    else:
        first = d < half
        k = d if first else d - half
        lo = 0 if first else -half
        hi = lo + half
    row = b * seq + s
    if has_pos:
        row = cast(pos.flat[row], i32)
    c = cast(cos.flat[row * half + k], f32)
    sn = cast(sin.flat[row * half + k], f32)
    x1 = cast(x.flat[out.flat + lo], f32)
    x2 = cast(x.flat[out.flat + hi], f32)
    r = c * x1 - sn * x2 if first else sn * x1 + c * x2
    return cast(r, out.dtype)


class RotaryEmbedding(OpDef):
    op_type = "RotaryEmbedding"
    since_version = 23

    def _check(self, node: Node, inputs) -> tuple[int, int]:
        shape = _float_input(self, node, inputs, 0, "X")
        cos = _float_input(self, node, inputs, 1, "cos_cache")
        if _float_input(self, node, inputs, 2, "sin_cache") != cos:
            raise self.fail(node, "cos_cache and sin_cache must have one shape")
        heads = self.attr(node, "num_heads")
        if len(shape) == 4:
            head = shape[3]
        elif len(shape) == 3 and heads and shape[2] % int(heads) == 0:
            head = shape[2] // int(heads)
        else:
            raise self.fail(node, f"X {shape} must be rank 4, or rank 3 with 'num_heads' "
                                  "dividing its last axis")
        rot = int(self.attr(node, "rotary_embedding_dim", 0)) or head
        if rot > head or rot % 2:
            raise self.fail(node, f"attribute 'rotary_embedding_dim' = {rot} must be even "
                                  f"and <= the head size {head}")
        pos = inputs[3] if len(inputs) > 3 else None
        batch, seq = shape[0], shape[2 if len(shape) == 4 else 1]
        want = (batch, seq) if pos is None else None
        if pos is not None and (pos.shape is None or tuple(pos.shape) != (batch, seq)):
            raise self.fail(node, f"position_ids {pos.shape} must be {(batch, seq)}")
        if cos[-1] != rot // 2 or (want is not None and cos[:-1] != want) or \
                (want is None and len(cos) != 2):
            raise self.fail(node, f"cos_cache {cos} does not match rotary dim {rot}")
        return head, rot

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        head, rot = self._check(node, array_infos(inputs))
        x, cos, sin = inputs[:3]
        pos = inputs[3] if len(inputs) > 3 else None
        shape = x.shape
        t = x.reshape(shape[0], shape[1], -1, head) if x.ndim == 3 else x.transpose(0, 2, 1, 3)
        if pos is not None:
            cos, sin = cos[pos], sin[pos]
        c, s = cos[:, :, None, :], sin[:, :, None, :]
        y = t.copy()
        r = t[..., :rot]
        x1, x2 = (r[..., 0::2], r[..., 1::2]) if self.attr(node, "interleaved", 0) else \
            (r[..., : rot // 2], r[..., rot // 2:])
        real, imag = c * x1 - s * x2, s * x1 + c * x2
        if self.attr(node, "interleaved", 0):
            y[..., 0:rot:2], y[..., 1:rot:2] = real, imag
        else:
            y[..., : rot // 2], y[..., rot // 2: rot] = real, imag
        y = y.reshape(shape) if x.ndim == 3 else y.transpose(0, 2, 1, 3)
        return [y.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        head, rot = self._check(node, inputs)
        has_pos = len(inputs) > 3 and inputs[3] is not None
        shape = static_shape(inputs[0])
        low = Lowering()
        low.launch(rotary, [In(0), In(1), In(2), In(3) if has_pos else In(1)], Out(0),
                   head=head, rot=rot, interleaved=bool(self.attr(node, "interleaved", 0)),
                   has_pos=has_pos, seq=shape[2 if len(shape) == 4 else 1])
        return low

    def cases(self) -> list[OpCase]:
        x4, x3 = _rand(0, 2, 2, 3, 8), _rand(1, 2, 3, 16)
        cos, sin = np.cos(_rand(2, 10, 4)), np.sin(_rand(3, 10, 4))
        pos = np.array([[0, 1, 2], [5, 9, 3]], np.int64)
        cos_b, sin_b = np.cos(_rand(4, 2, 3, 2)), np.sin(_rand(5, 2, 3, 2))
        return [
            OpCase("4d_pos", [x4, cos, sin, pos]),
            OpCase("4d_pos_interleaved", [x4, cos, sin, pos], {"interleaved": 1}),
            OpCase("3d_heads", [x3, cos, sin, pos], {"num_heads": 2}),
            OpCase("partial_no_pos", [x4, cos_b, sin_b], {"rotary_embedding_dim": 4}),
            OpCase("partial_interleaved_3d", [x3, cos_b, sin_b],
                   {"rotary_embedding_dim": 4, "interleaved": 1, "num_heads": 2}),
        ]


# ------------------------------------------------------------------ SwiGLU


@helper
def swiglu_fn(a, b, params):
    """a * sigmoid(alpha * a) * b, the sigmoid rounded to the input type (as the
    reference's Swish)."""
    af = cast(a, f32)
    sig = cast_like(1.0 / (1.0 + exp(-params[0] * af)), a)
    return cast_like(cast(a * sig, f32) * cast(b, f32), a)


class SwiGLU(OpDef):
    op_type = "SwiGLU"
    since_version = 28

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        a = _float_input(self, node, inputs, 0, "A")
        b = _float_input(self, node, inputs, 1, "B")
        if a != b or inputs[0].dtype != inputs[1].dtype:
            raise self.fail(node, f"A {a} and B {b} must share shape and dtype (no "
                                  "broadcasting)")
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        a, b = inputs[:2]
        alpha = float(self.attr(node, "alpha", 1.0))
        sig = (1.0 / (1.0 + np.exp(-alpha * a.astype(np.float32)))).astype(a.dtype)
        return [((a * sig).astype(np.float32) * b).astype(a.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        self.infer(node, inputs, values)
        low = Lowering()
        low.launch(binary_map_params, [In(0), In(1)], Out(0), fn=swiglu_fn,
                   params=(float(self.attr(node, "alpha", 1.0)),))
        return low

    def cases(self) -> list[OpCase]:
        a, b = _rand(0, 3, 5), _rand(1, 3, 5)
        return [
            OpCase("default", [a, b]),
            OpCase("alpha", [a, b], {"alpha": 1.702}),
            OpCase("f16", [a.astype(np.float16), b.astype(np.float16)], rtol=2e-3, atol=2e-3),
        ]


OPS: list[type[OpDef]] = [RMSNormalization, RotaryEmbedding, SwiGLU, *RECURRENT_OPS]
