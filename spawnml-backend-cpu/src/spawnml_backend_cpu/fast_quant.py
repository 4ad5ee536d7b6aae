"""com.microsoft MatMulNBits on the cpu backend: block-quantised weights dequantised one tile
of output columns at a time, each tile multiplied by BLAS.

The packed weights stay packed in the model's buffer. Per call, for each tile of
:func:`tile_rows` weight rows (output columns; at most :data:`TILE_BYTES` of float32, so the
tile stays in cache), the ``8 / bits`` values of every byte are unpacked with shifts and
masks into a uint8 tile grouped by their position in the byte, converted to float32 minus
the zero point, multiplied by the block scales, and ``A' @ tile^T`` fills the tile's
columns of the output, where ``A'`` is A with its K columns put in the same grouped order
(and zero-padded to whole blocks). The temporaries are that one tile (uint8 and float32),
reused across tiles and calls; constant zero points are unpacked once to float32 (the
size of the scales).
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import kernel_attributes

from .fast_kernels import Arrays, Compute, CpuKernel, _known

TILE_BYTES = 1 << 19


def tile_rows(k_padded: int, n: int) -> int:
    """Weight rows per tile: TILE_BYTES of float32, at least one."""
    return max(1, min(n, TILE_BYTES // (4 * k_padded)))


def unpack_into(packed: np.ndarray, bits: int, out: np.ndarray) -> None:
    """(rows, blocks, per, blob) uint8 ``out`` from (rows, blocks, blob) bytes: value i of
    each byte (low bits first) at ``out[..., i, :]``."""
    mask = (1 << bits) - 1
    for i in range(8 // bits):
        np.right_shift(packed, i * bits, out=out[:, :, i, :])
        if (i + 1) * bits < 8:
            np.bitwise_and(out[:, :, i, :], mask, out=out[:, :, i, :])


def grouped_columns(x: np.ndarray, k: int, blocks: int, blob: int, per: int) -> np.ndarray:
    """(M, blocks * blob * per) float32: A's columns zero-padded to whole blocks and put in
    the unpacked tile's order (within a block: value i of every byte, then i + 1...)."""
    padded = np.zeros((x.shape[0], blocks * blob * per), np.float32)
    padded[:, :k] = x
    return padded.reshape(-1, blocks, blob, per).transpose(0, 1, 3, 2).reshape(x.shape[0], -1)


def _zero_points(z: np.ndarray | None, mode: str, n: int, blocks: int, bits: int
                 ) -> np.ndarray | None:
    """(n, blocks, 1, 1) float32 zero points (None: the default, applied in the cast)."""
    if mode == "default" or z is None:
        return None
    if mode == "float":
        return z.reshape(n, blocks, 1, 1).astype(np.float32)
    raw = z.reshape(n, -1)
    mask = (1 << bits) - 1
    values = np.stack([(raw >> (i * bits)) & mask for i in range(8 // bits)], -1)
    return values.reshape(n, -1)[:, :blocks].astype(np.float32).reshape(n, blocks, 1, 1)


class MatMulNBits(CpuKernel):
    """float32 A, 2/4/8-bit B with float32 scales, optional uint8 or float32 zero points and
    bias."""

    domain = "com.microsoft"
    op_type = "MatMulNBits"
    since_version = 1
    attributes = kernel_attributes("K", "N", "bits", "block_size", "accuracy_level",
                                   weight_prepacked=(0,))
    dtype_inputs = (0, 2, 5)

    def accepts(self, node, inputs, outputs) -> bool:
        g_idx = len(inputs) > 4 and inputs[4] is not None
        return not g_idx and int(node.attrs.get("bits", 4)) in (2, 4, 8)

    def build(self, node, inputs, outputs, values) -> Compute:
        k, n = int(node.attrs["K"]), int(node.attrs["N"])
        bits, block = int(node.attrs.get("bits", 4)), int(node.attrs["block_size"])
        per, blocks = 8 // bits, -(-k // block)
        blob = block // per
        z = inputs[3] if len(inputs) > 3 else None
        mode = "default" if z is None else ("packed" if z.dtype == DType.uint8 else "float")
        offset = np.float32(1 << (bits - 1) if mode == "default" else 0)
        rows = tile_rows(blocks * block, n)
        has_bias = len(inputs) > 5 and inputs[5] is not None
        known = _known(values, 3)  # constant zero points: unpacked once (scales' size)
        fixed = None if known is None else _zero_points(known, mode, n, blocks, bits)
        raw = np.empty((rows, blocks, per, blob), np.uint8)
        tile = np.empty((rows, blocks, per, blob), np.float32)

        def compute(a: Arrays, out: list[np.ndarray]) -> None:
            x = grouped_columns(a[0].reshape(-1, k), k, blocks, blob, per)
            y = out[0].reshape(-1, n)
            w = a[1].reshape(n, blocks, blob)
            s = a[2].reshape(n, blocks, 1, 1)
            zp = fixed if fixed is not None else \
                _zero_points(a[3] if len(a) > 3 else None, mode, n, blocks, bits)
            for r0 in range(0, n, rows):
                r1 = min(n, r0 + rows)
                u, t = raw[: r1 - r0], tile[: r1 - r0]
                unpack_into(w[r0:r1], bits, u)
                np.subtract(u, offset, out=t)
                if zp is not None:
                    t -= zp[r0:r1]
                t *= s[r0:r1]
                np.matmul(x, t.reshape(r1 - r0, -1).T, out=y[:, r0:r1])
            if has_bias:
                y += a[5]

        return compute


KERNELS: list[type[CpuKernel]] = [MatMulNBits]
