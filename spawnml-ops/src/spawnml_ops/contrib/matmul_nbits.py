"""MatMulNBits: A @ dequantise(B)^T with B (N, K) quantised to 2, 4 or 8 bits in blocks
along K, one scale (and zero point) per block.

The packed weights stay packed in device memory: one gather launch reads each weight byte
and extracts the value with shifts and a mask inside the kernel, dequantising it as
(q - zero_point) * scale (onnxruntime's formula), then accumulates in float32.
"""


from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, f32, i32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import DOMAIN, FLOATS, int_attr, optional, rand

ZP_DEFAULT, ZP_PACKED, ZP_FLOAT = 0, 1, 2


@kernel
def matmul_nbits(
    a: Tensor, w: Tensor, scales: Tensor, zp: Tensor, bias: Tensor, out: Output, k_len: int,
    block: int, blocks: int, bits: int, zp_mode: int, zp_cols: int, has_bias: bool,
    ragged: bool,
):
    """out[r, n] = sum_k a[r, k] * (q[n, k] - zp[n, k // block]) * scale[n, k // block] (+
    bias[n]); q is unpacked from the bytes of w (N, blocks, block * bits / 8), low bits
    first."""
    n = out.index[out.ndim - 1]
    r = out.flat // out.shape[out.ndim - 1]
    per = 8 // bits
    mask = (1 << bits) - 1
    blob = block // per
    acc = 0.0
    for blk in range(blocks):
        for j in range(block):
            k = blk * block + j
            byte = cast(w.flat[(n * blocks + blk) * blob + j // per], i32)
            q = cast((byte >> ((j % per) * bits)) & mask, f32)
            z = cast(1 << (bits - 1), f32)
            if zp_mode == 1:
                zb = cast(zp.flat[n * zp_cols + blk // per], i32)
                z = cast((zb >> ((blk % per) * bits)) & mask, f32)
            elif zp_mode == 2:
                z = cast(zp.flat[n * blocks + blk], f32)
            wv = (q - z) * cast(scales.flat[n * blocks + blk], f32)
            if ragged:
                if k < k_len:
                    acc = acc + cast(a.flat[r * k_len + k], f32) * wv
            else:
                acc = acc + cast(a.flat[r * k_len + k], f32) * wv
    if has_bias:
        acc = acc + cast(bias.flat[n], f32)
    return cast(acc, out.dtype)


def quantize_blockwise(w: np.ndarray, bits: int, block: int, seed: int = 0,
                       float_zp: bool = False) -> tuple[np.ndarray, ...]:
    """Random packed weights for a float (K, N) matrix shape: (B, scales, zero_points)
    in MatMulNBits' layout (a test-data helper)."""
    k, n = w.shape
    blocks = -(-k // block)
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 1 << bits, (n, blocks * block)).astype(np.uint8)
    per = 8 // bits
    packed = np.zeros((n, blocks * block // per), np.uint8)
    for i in range(per):
        packed |= (q[:, i::per] << (i * bits)).astype(np.uint8)
    scales = (rng.uniform(0.01, 0.1, (n, blocks))).astype(np.float32)
    if float_zp:
        zp = rng.uniform(0, (1 << bits) - 1, (n, blocks)).astype(np.float32)
        return packed.reshape(n, blocks, -1), scales.reshape(-1), zp.reshape(-1)
    zq = rng.integers(0, 1 << bits, (n, -(-blocks // per) * per)).astype(np.uint8)
    zpk = np.zeros((n, zq.shape[1] // per), np.uint8)
    for i in range(per):
        zpk |= (zq[:, i::per] << (i * bits)).astype(np.uint8)
    return packed.reshape(n, blocks, -1), scales.reshape(-1), zpk.reshape(-1)


class MatMulNBits(OpDef):
    """com.microsoft MatMulNBits (bits 2, 4 or 8; accuracy_level ignored)."""

    domain = DOMAIN
    op_type = "MatMulNBits"
    since_version = 1
    dtypes = FLOATS

    def _geometry(self, node: Node, inputs) -> dict:
        a = optional(inputs, 0)
        if a is None or a.dtype not in FLOATS:
            raise self.fail(node, "input A is required and must be float32 or float16")
        k = int_attr(self, node, "K", required=True)
        n = int_attr(self, node, "N", required=True)
        bits = int_attr(self, node, "bits", 4, choices=(2, 4, 8))
        block = int_attr(self, node, "block_size", required=True)
        if block < 16 or block & (block - 1):
            raise self.fail(node, f"attribute 'block_size' = {block} must be a power of two "
                                  ">= 16")
        if int_attr(self, node, "weight_prepacked", 0) != 0:
            raise UnsupportedOpError(f"{node.describe()}: prepacked weights "
                                     "(weight_prepacked != 0) are not supported")
        blocks = -(-k // block)
        blob = block * bits // 8
        if a.shape is not None and a.shape and a.shape[-1] not in (k, None) and \
                not isinstance(a.shape[-1], str):
            raise self.fail(node, f"A {a.shape} must end in K = {k}")
        w = optional(inputs, 1)
        if w is None or w.dtype != DType.uint8:
            raise self.fail(node, "input B is required and must be uint8")
        if w.shape is not None and int(np.prod(w.shape)) != n * blocks * blob:
            raise self.fail(node, f"B {w.shape} must hold (N, k_blocks, blob_size) = "
                                  f"{(n, blocks, blob)}")
        s = optional(inputs, 2)
        if s is None or s.dtype != a.dtype:
            raise self.fail(node, f"input scales is required with A's dtype {a.dtype}")
        if s.shape is not None and int(np.prod(s.shape)) != n * blocks:
            raise self.fail(node, f"scales {s.shape} must hold N * k_blocks = {n * blocks}")
        zp_mode, zp_cols = ZP_DEFAULT, 0
        z = optional(inputs, 3)
        if z is not None:
            if z.dtype == DType.uint8:
                zp_mode, zp_cols = ZP_PACKED, -(-blocks * bits // 8)
                want = n * zp_cols
            elif z.dtype == a.dtype:
                zp_mode, want = ZP_FLOAT, n * blocks
            else:
                raise self.fail(node, f"zero_points must be uint8 or {a.dtype}, got {z.dtype}")
            if z.shape is not None and int(np.prod(z.shape)) != want:
                raise self.fail(node, f"zero_points {z.shape} must hold {want} elements")
        if optional(inputs, 4) is not None:
            raise UnsupportedOpError(f"{node.describe()}: input g_idx (deprecated) is not "
                                     "supported")
        bias = optional(inputs, 5)
        if bias is not None and (bias.dtype != a.dtype or
                                 (bias.shape is not None and tuple(bias.shape) != (n,))):
            raise self.fail(node, f"bias must be ({n},) of A's dtype")
        return dict(k=k, n=n, bits=bits, block=block, blocks=blocks, zp_mode=zp_mode,
                    zp_cols=zp_cols, has_bias=bias is not None)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        g = self._geometry(node, inputs)
        a = inputs[0]
        shape = None if a.shape is None else (*a.shape[:-1], g["n"])  # type: ignore[union-attr]
        return [TensorInfo(a.dtype, shape)]  # type: ignore[union-attr]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        g = self._geometry(node, array_infos(inputs))
        a, w, scales = inputs[:3]
        n, bits, block, blocks = g["n"], g["bits"], g["block"], g["blocks"]
        per, mask = 8 // bits, (1 << bits) - 1
        raw = w.reshape(n, -1)
        q = np.stack([(raw >> (i * bits)) & mask for i in range(per)], -1).reshape(n, -1)
        if g["zp_mode"] == ZP_PACKED:
            zr = inputs[3].reshape(n, -1)
            z = np.stack([(zr >> (i * bits)) & mask for i in range(per)], -1).reshape(n, -1)
            z = z[:, :blocks].astype(np.float32)
        elif g["zp_mode"] == ZP_FLOAT:
            z = inputs[3].reshape(n, blocks).astype(np.float32)
        else:
            z = np.full((n, blocks), 1 << (bits - 1), np.float32)
        s = scales.reshape(n, blocks).astype(np.float32)
        deq = (q.reshape(n, blocks, block) - z[..., None]) * s[..., None]
        wt = deq.reshape(n, -1)[:, : g["k"]].astype(np.float64)
        y = a.astype(np.float64) @ wt.T
        if g["has_bias"]:
            y = y + inputs[5].astype(np.float64)
        return [y.astype(a.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._geometry(node, inputs)
        low = Lowering()
        zp = In(3) if g["zp_mode"] != ZP_DEFAULT else In(2)
        bias = In(5) if g["has_bias"] else In(2)
        low.launch(matmul_nbits, [In(0), In(1), In(2), zp, bias], Out(0), k_len=g["k"],
                   block=g["block"], blocks=g["blocks"], bits=g["bits"], zp_mode=g["zp_mode"],
                   zp_cols=g["zp_cols"], has_bias=g["has_bias"],
                   ragged=g["k"] % g["block"] != 0)
        return low

    def cases(self) -> list[OpCase]:
        a = rand(0, 2, 3, 64)
        attrs = {"K": 64, "N": 5, "bits": 4, "block_size": 32}
        w, s, z = quantize_blockwise(np.empty((64, 5)), 4, 32)
        wf, sf, zf = quantize_blockwise(np.empty((64, 5)), 4, 16, seed=1, float_zp=True)
        w8, s8, z8 = quantize_blockwise(np.empty((64, 5)), 8, 32, seed=2)
        wr, sr, zr = quantize_blockwise(np.empty((40, 3)), 4, 16, seed=3)
        tol = dict(rtol=1e-4, atol=1e-4)
        return [
            OpCase("int4_zp", [a, w, s, z], attrs, **tol),
            OpCase("int4_default_zp_bias", [a, w, s, None, None, rand(1, 5)], attrs, **tol),
            OpCase("int4_float_zp_block16", [a[0], wf, sf, zf], {**attrs, "block_size": 16},
                   **tol),
            OpCase("int8", [a, w8, s8, z8], {**attrs, "bits": 8}, **tol),
            OpCase("ragged_k", [rand(4, 2, 40), wr, sr, zr],
                   {"K": 40, "N": 3, "bits": 4, "block_size": 16}, **tol),
            OpCase("f16", [a.astype(np.float16), w, s.astype(np.float16), z], attrs,
                   rtol=3e-3, atol=3e-3),
        ]


OPS: list[type[OpDef]] = [MatMulNBits]
