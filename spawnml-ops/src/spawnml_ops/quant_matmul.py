"""Integer matrix products: MatMulInteger (int32 accumulation) and QLinearMatMul
(the same accumulation, then requantised in a second launch)."""


from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel, static_range
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import broadcast_shapes
from .quant_common import QRANGES, requant_scale, saturate, saturate_round, zero_or

_INT8 = (DType.uint8, DType.int8)


@dataclass(frozen=True)
class MatMulGeometry:
    """numpy matmul rules: output shape and the strides the kernel walks."""

    shape: tuple
    nb: int  # batch dims of the output
    a_vec: bool  # A is 1-D (no M axis in the output)
    b_vec: bool  # B is 1-D (no N axis in the output)

    def consts(self, a: tuple, b: tuple) -> dict:
        k = a[-1]
        return {
            "nb": self.nb, "k_len": int(k),
            "a_ms": 0 if self.a_vec else int(a[-1]), "b_ks": 1 if self.b_vec else int(b[-1]),
            "a_vec": self.a_vec, "b_vec": self.b_vec,
        }


def matmul_geometry(
    op: OpDef, node: Node, a: tuple | None, b: tuple | None
) -> MatMulGeometry | None:
    """Output shape and kernel constants of A @ B (None while a shape is unknown)."""
    if a is None or b is None:
        return None
    if len(a) == 0 or len(b) == 0:
        raise op.fail(node, "inputs must have rank >= 1")
    a_vec, b_vec = len(a) == 1, len(b) == 1
    a2 = (1, *a) if a_vec else tuple(a)
    b2 = (*b, 1) if b_vec else tuple(b)
    if isinstance(a2[-1], int) and isinstance(b2[-2], int) and a2[-1] != b2[-2]:
        raise op.fail(node, f"inner dimensions differ: {tuple(a)} x {tuple(b)}")
    batch = broadcast_shapes(node, a2[:-2], b2[:-2])
    shape = (*batch, *(() if a_vec else (a2[-2],)), *(() if b_vec else (b2[-1],)))  # type: ignore[misc]
    return MatMulGeometry(shape, len(batch), a_vec, b_vec)  # type: ignore[arg-type]


@helper
def batch_offset(t, out, nb, core):
    """Offset of ``t``'s broadcast batch position (its dims before the last ``core``)."""
    off = 0
    for d in static_range(t.ndim - core):
        if t.shape[d] != 1:
            off = off + out.index[nb - (t.ndim - core) + d] * t.strides[d]
    return off


@helper
def row_col(out, nb, a_vec, b_vec):
    """(m, n) of this output element (0 along a vector operand's missing axis)."""
    m = 0
    n = 0
    if not a_vec:
        m = out.index[nb]
    if not b_vec:
        n = out.index[out.ndim - 1]
    return m, n


@helper
def matrix_param_offset(p, out, nb, i, row):
    """Offset of a per-tensor, per-row (``row``) or per-column quantisation parameter:
    one element, a vector, or an N-D tensor shaped [..., M, 1] / [..., 1, N]."""
    off = 0
    if p.size == 1:
        off = 0
    elif p.ndim == 1:
        off = i
    elif row:
        off = batch_offset(p, out, nb, 2) + i * p.strides[p.ndim - 2]
    else:
        off = batch_offset(p, out, nb, 2) + i * p.strides[p.ndim - 1]
    return off


@kernel
def matmul_integer(a: Tensor, b: Tensor, azp: Tensor, bzp: Tensor, out: Output, nb: int,
                   k_len: int, a_ms: int, b_ks: int, a_vec: bool, b_vec: bool):
    m, n = row_col(out, nb, a_vec, b_vec)
    a0 = batch_offset(a, out, nb, 2) + m * a_ms
    b0 = batch_offset(b, out, nb, 2) + n
    za = cast(azp.flat[matrix_param_offset(azp, out, nb, m, True)], i32)
    zb = cast(bzp.flat[matrix_param_offset(bzp, out, nb, n, False)], i32)
    acc = 0
    for k in range(k_len):
        acc = acc + (cast(a.flat[a0 + k], i32) - za) * (cast(b.flat[b0 + k * b_ks], i32) - zb)
    return acc


@kernel
def requantize_matmul(acc: Tensor, sa: Tensor, sb: Tensor, sy: Tensor, zy: Tensor,
                      out: Output, nb: int, a_vec: bool, b_vec: bool, lo: float, hi: float):
    m, n = row_col(out, nb, a_vec, b_vec)
    scale = requant_scale(sa.flat[matrix_param_offset(sa, out, nb, m, True)],
                          sb.flat[matrix_param_offset(sb, out, nb, n, False)], sy.flat[0])
    v = round(cast(acc.flat[out.flat], f32) * scale) + cast(zy.flat[0], f32)
    return cast(saturate(v, lo, hi), out.dtype)


def _int_matmul_reference(a, b, azp, bzp) -> np.ndarray:
    """Per-row zero points of A broadcast along K, per-column ones of B along K."""
    a32 = np.asarray(a).astype(np.int32)
    b32 = np.asarray(b).astype(np.int32)
    if azp is not None:
        z = np.asarray(azp).astype(np.int32)
        a32 = a32 - (z.reshape(-1, 1) if z.ndim == 1 and z.size > 1 and a32.ndim > 1 else z)
    if bzp is not None:
        b32 = b32 - np.asarray(bzp).astype(np.int32)
    return np.matmul(a32, b32).astype(np.int32)


class MatMulInteger(OpDef):
    """A @ B of (u)int8 tensors minus zero points, accumulated in int32."""

    op_type = "MatMulInteger"
    since_version = 10

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise self.fail(node, "expects inputs A, B[, a_zero_point, b_zero_point]")
        for i, info in enumerate(inputs[:4]):
            if info is not None and info.dtype not in _INT8:
                raise self.fail(node, f"input {i} must be uint8/int8, got {info.dtype}")
        for zi, xi in ((2, 0), (3, 1)):
            if len(inputs) > zi and inputs[zi] is not None \
                    and inputs[zi].dtype is not inputs[xi].dtype:  # type: ignore[union-attr]
                raise self.fail(node, f"zero point {zi} must match input {xi}'s dtype")
        geo = matmul_geometry(self, node, inputs[0].shape, inputs[1].shape)
        return [TensorInfo(DType.int32, None if geo is None else geo.shape)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        azp = inputs[2] if len(inputs) > 2 else None
        bzp = inputs[3] if len(inputs) > 3 else None
        return [_int_matmul_reference(inputs[0], inputs[1], azp, bzp)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        a, b = inputs[0].shape, inputs[1].shape
        geo = matmul_geometry(self, node, a, b)
        azp = In(2) if len(inputs) > 2 and inputs[2] is not None else None
        bzp = In(3) if len(inputs) > 3 and inputs[3] is not None else None
        low = Lowering()
        low.launch(matmul_integer, [In(0), In(1), zero_or(azp), zero_or(bzp)], Out(0),
                   **geo.consts(a, b))  # type: ignore[union-attr]
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(0)
        a = rng.integers(0, 256, (3, 4)).astype(np.uint8)
        b = rng.integers(0, 256, (4, 2)).astype(np.uint8)
        ai8 = rng.integers(-128, 128, (2, 1, 3, 5)).astype(np.int8)
        bi8 = rng.integers(-128, 128, (4, 5, 2)).astype(np.int8)
        return [
            OpCase("uint8_2d", [a, b, np.array(12, np.uint8), np.array(0, np.uint8)]),
            OpCase("no_zero_points", [a, b]),
            OpCase("per_row_col_zp", [a, b, np.array([1, 2, 3], np.uint8),
                                      np.array([4, 250], np.uint8)]),
            OpCase("int8_broadcast_batch", [ai8, bi8, np.array(-3, np.int8),
                                            np.array(5, np.int8)]),
            OpCase("vector_a", [a[0], b]),
            OpCase("vector_b", [a, b[:, 0]]),
            OpCase("vectors", [a[0], b[:, 0]]),
            OpCase("size1", [a[:1, :1], b[:1, :1]]),
        ]


class QLinearMatMul(OpDef):
    """Quantised matmul: saturate(round((A - za) @ (B - zb) * sa * sb / sy) + zy)."""

    op_type = "QLinearMatMul"
    since_version = 10

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) != 8 or any(i is None for i in inputs):
            raise self.fail(node, "expects 8 inputs a, a_scale, a_zp, b, b_scale, b_zp, "
                                  "y_scale, y_zp")
        a, sa, za, b, sb, zb, sy, zy = inputs
        for name, q in (("a", a), ("b", b), ("y_zero_point", zy)):
            if q.dtype not in _INT8:  # type: ignore[union-attr]
                raise self.fail(node, f"{name} must be uint8/int8, got {q.dtype}")  # type: ignore[union-attr]
        if za.dtype is not a.dtype or zb.dtype is not b.dtype:  # type: ignore[union-attr]
            raise self.fail(node, "zero points must match their operand's dtype")
        for name, s in (("a_scale", sa), ("b_scale", sb), ("y_scale", sy)):
            if not s.dtype.is_float:  # type: ignore[union-attr]
                raise self.fail(node, f"{name} must be a float tensor, got {s.dtype}")  # type: ignore[union-attr]
            if node.opset < 21 and s.dtype is not DType.float32:  # type: ignore[union-attr]
                raise self.fail(node, f"{name} must be float32 before opset 21")
        if sy.shape is not None and any(d != 1 for d in sy.shape):  # type: ignore[union-attr]
            raise UnsupportedOpError(f"{node.describe()}: y_scale must be per-tensor")
        geo = matmul_geometry(self, node, a.shape, b.shape)  # type: ignore[union-attr]
        return [TensorInfo(zy.dtype, None if geo is None else geo.shape)]  # type: ignore[union-attr]

    def reference(self, node, inputs) -> list[np.ndarray]:
        a, sa, za, b, sb, zb, sy, zy = (np.asarray(x) for x in inputs)
        acc = _int_matmul_reference(a, b, za, zb)
        sa_ = sa.reshape(-1, 1) if sa.ndim == 1 and sa.size > 1 and a.ndim > 1 else sa
        scale = (sa_.astype(np.float32) * sb.astype(np.float32)) / sy.astype(np.float32)
        with np.errstate(all="ignore"):
            v = np.rint(acc.astype(np.float32) * scale) + zy.astype(np.float32)
        return [saturate_round(v, as_dtype(zy.dtype))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        a, b = inputs[0].shape, inputs[3].shape
        geo = matmul_geometry(self, node, a, b)
        low = Lowering()
        acc = low.temp(DType.int32, outputs[0].shape)  # type: ignore[arg-type]
        c = geo.consts(a, b)  # type: ignore[union-attr]
        low.launch(matmul_integer, [In(0), In(3), In(2), In(5)], acc, **c)
        lo, hi = QRANGES[outputs[0].dtype]
        low.launch(requantize_matmul, [acc, In(1), In(4), In(6), In(7)], Out(0), nb=c["nb"],
                   a_vec=c["a_vec"], b_vec=c["b_vec"], lo=float(lo), hi=float(hi))
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(1)
        a = rng.integers(0, 256, (2, 3, 4)).astype(np.uint8)
        b = rng.integers(0, 256, (4, 3)).astype(np.uint8)

        def args(a, b, sa=0.05, sb=0.02, zdt=np.uint8):
            return [a, np.array(sa, np.float32), np.array(113, a.dtype), b,
                    np.array(sb, np.float32), np.array(114, b.dtype),
                    np.array(0.3, np.float32), np.array(100, zdt)]

        per_row = args(a[0], b)
        per_row[1] = np.array([0.05, 0.01, 0.2], np.float32)
        per_row[4] = np.array([0.02, 0.5, 0.001], np.float32)
        i8 = args(a.astype(np.int8), b.astype(np.int8), zdt=np.int8)
        return [
            OpCase("uint8_3d", args(a, b), atol=1),
            OpCase("int8", i8, atol=1),
            OpCase("per_row_col_scales", per_row, atol=1),
            OpCase("float16_scales", [x.astype(np.float16) if x.dtype == np.float32 else x
                                      for x in args(a, b)], opset=21, atol=1),
            OpCase("saturating", args(a, b, sa=5.0, sb=5.0), atol=1),
            OpCase("vector", args(a[0, 0], b[:, 0]), atol=1),
        ]


QUANT_MATMUL_OPS: list[type[OpDef]] = [MatMulInteger, QLinearMatMul]
