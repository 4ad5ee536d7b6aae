"""MelWeightMatrix: the [dft_length // 2 + 1, num_mel_bins] triangular mel filter bank,
computed on the host (a small constant that models fold once)."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType, from_onnx
from spawnml.op import Node, OpCase, OpDef, TensorInfo

from .axes import input_ints


def mel_matrix(bins: int, dft_length: int, rate: int, low_hz: float, high_hz: float
               ) -> np.ndarray:
    """The filter bank in float64, as the ONNX reference builds it (mel = 2595 log10(1 +
    hz / 700); band edges floored to DFT bins)."""
    n_spec = dft_length // 2 + 1
    low_mel = 2595 * np.log1p(low_hz / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high_hz / 700) / np.log(10)
    edges = np.arange(bins + 2) * ((high_mel - low_mel) / (bins + 2)) + low_mel
    hz = 700 * np.expm1(edges / 2595 * np.log(10))
    idx = (((dft_length + 1) * hz) // rate).astype(np.int64)
    out = np.zeros((n_spec, bins))
    for i in range(bins):
        lo, center, hi = (int(v) for v in idx[i:i + 3])
        if center == lo:
            out[center, i] = 1.0
        else:
            for j in range(lo, center + 1):
                out[j, i] = (j - lo) / (center - lo)
        for j in range(center, hi):
            out[j, i] = (hi - j) / (hi - center)
    return out


class MelWeightMatrix(OpDef):
    """ONNX MelWeightMatrix (opset 17); host-only (its inputs are scalars)."""

    op_type = "MelWeightMatrix"
    since_version = 17
    host_only = True
    edge_values = False  # the edge frequencies must be ordered, finite and non-negative
    value_inputs = (0, 1, 2)

    def _dtype(self, node: Node) -> DType:
        dt = from_onnx(int(self.attr(node, "output_datatype", 1)))
        if not (dt.is_float or dt.is_int):
            raise self.fail(node, f"output_datatype must be a numeric type, got {dt}")
        return dt

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) != 5 or any(i is None for i in inputs):
            raise self.fail(node, "expects 5 inputs: num_mel_bins, dft_length, sample_rate, "
                                  "lower_edge_hertz, upper_edge_hertz")
        dt = self._dtype(node)
        bins, length = input_ints(self, node, values, 0), input_ints(self, node, values, 1)
        return [TensorInfo(dt, (None if length is None else length[0] // 2 + 1,
                                None if bins is None else bins[0]))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        bins, length, rate = (int(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
        low, high = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[3:5])
        if bins <= 0 or length <= 0 or rate <= 0 or not 0 <= low < high:
            raise self.fail(node, f"needs num_mel_bins, dft_length, sample_rate > 0 and 0 <= "
                                  f"lower_edge_hertz < upper_edge_hertz, got {bins}, {length},"
                                  f" {rate}, {low}, {high}")
        if high > rate / 2 + 1e-9 * rate:
            raise self.fail(node, f"upper_edge_hertz {high} is above the Nyquist frequency "
                                  f"{rate / 2}")
        return [mel_matrix(bins, length, rate, low, high).astype(self._dtype(node).numpy)]

    def cases(self) -> list[OpCase]:
        i = np.int64
        return [OpCase("default", [np.array(8, i), np.array(16, i), np.array(8192, i),
                                   np.array(0, np.float32), np.array(4096, np.float32)]),
                OpCase("double", [np.array(4, i), np.array(32, i), np.array(16000, i),
                                  np.array(100, np.float32), np.array(7000, np.float32)],
                       {"output_datatype": 11})]
