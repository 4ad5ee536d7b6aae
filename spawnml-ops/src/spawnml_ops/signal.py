"""Signal processing: DFT, STFT, the Hann, Hamming and Blackman windows (and
MelWeightMatrix, on the host: ``mel``).

Signals carry a trailing component axis: 1 (real) or 2 (real, imaginary). DFT is a direct
O(n^2) gather kernel over the transformed axis (one output component per invocation, the
twiddle angle reduced modulo the length in integers so it stays exact); the inverse real
transform (``inverse`` + ``onesided``) and STFT run on the host. Windows are gather
kernels once their size is a constant.
"""

# ruff: noqa: F821  (kernel intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math

import numpy as np

from spawnml.dtypes import DType, from_onnx
from spawnml.kernel import Output, Tensor, cast, f32, kernel
from spawnml.op import Data, HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import input_ints, require_values, static
from .common import normalize_axis
from .mel import MelWeightMatrix

FLOATS = (DType.float32, DType.float16, DType.float64)


# -------------------------------------------------------------------------------- DFT


@kernel
def dft(x: Tensor, twiddle: Tensor, out: Output, axis: int, length: int, n_in: int,
        inverse: bool):
    """Component (re or im) of bin k along ``axis`` of the length-``length`` (i)DFT;
    ``twiddle[m] = (cos, sin)(2 pi m / length)`` (computed in float64 on the host, so the
    symmetric zeros of the transform stay zeros)."""
    comp = out.flat % 2
    stride = out.strides[axis] // 2  # in complex elements
    pos = out.flat // 2
    k = (pos // stride) % out.shape[axis]
    base = pos - k * stride  # element 0 of the row, in output complex elements
    in_base = (base // (stride * out.shape[axis])) * (stride * n_in) + base % stride
    c_in = x.shape[x.ndim - 1]
    re = 0.0
    im = 0.0
    for j in range(min(n_in, length)):
        m = (j * k) % length
        xr = cast(x.flat[(in_base + j * stride) * c_in], f32)
        xi = 0.0
        if c_in == 2:
            xi = cast(x.flat[(in_base + j * stride) * c_in + 1], f32)
        c = twiddle.flat[m * 2]
        s = twiddle.flat[m * 2 + 1] if inverse else -twiddle.flat[m * 2 + 1]
        re = re + (xr * c - xi * s)
        im = im + (xr * s + xi * c)
    v = re if comp == 0 else im
    if inverse:
        v = v / length
    return cast(v, out.dtype)


def _complex(x: np.ndarray) -> np.ndarray:
    """Complex values in the input's precision (complex64 for float32, as onnx.reference
    and the official expected outputs compute them)."""
    x = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0] + 0j


def _stack(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


class DFT(OpDef):
    op_type = "DFT"
    since_version = 17
    value_inputs = (1, 2)
    # Which outputs a NaN/±Inf input reaches depends on the algorithm: an FFT's structural
    # zeros (the imaginary part at frequency 0 of a real signal) stay 0, a direct sum's
    # NaN × sin(0) is NaN. Both are right; the suite tests only finite values here.
    edge_unspecified_inputs = (0,)

    def _params(self, node: Node, inputs, values) -> tuple[int, int | None, bool, bool]:
        """(axis, dft_length or None when unknown, inverse, onesided)."""
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(x.shape) < 2:
            raise self.fail(node, "input needs a known rank >= 2 (signal, ..., components)")
        if x.dtype not in FLOATS:
            raise self.fail(node, f"dtype {x.dtype} is not a float type")
        if x.shape[-1] not in (1, 2, None):
            raise self.fail(node, f"last axis must be 1 (real) or 2 (complex), got {x.shape}")
        rank = len(x.shape)
        if node.opset >= 20:
            found = input_ints(self, node, values, 2)
            has_axis = len(node.inputs) > 2 and node.inputs[2] != ""
            if has_axis and found is None:
                raise HostOnly(f"{node.describe()}: the axis input is not a constant")
            axis = found[0] if found else -2
        else:
            axis = int(self.attr(node, "axis", 1))
        axis = normalize_axis(node, axis, rank)
        if axis == rank - 1:
            raise self.fail(node, "axis cannot be the component axis")
        inverse = bool(self.attr(node, "inverse", 0))
        onesided = bool(self.attr(node, "onesided", 0))
        has_len = len(node.inputs) > 1 and node.inputs[1] != ""
        found_len = input_ints(self, node, values, 1)
        n = x.shape[axis]
        if has_len:
            length = found_len[0] if found_len else None
        elif isinstance(n, int):
            length = 2 * (n - 1) if inverse and onesided else n
        else:
            length = None
        if length is not None and length < 1:
            raise self.fail(node, f"dft_length {length} must be >= 1")
        return axis, length, inverse, onesided

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        try:
            axis, length, inverse, onesided = self._params(node, inputs, values)
        except HostOnly:
            return [TensorInfo(inputs[0].dtype, None)]
        shape = list(inputs[0].shape)
        if inverse and onesided:
            shape[axis], shape[-1] = length, 1
        else:
            shape[axis] = None if length is None else (length // 2 + 1 if onesided else length)
            shape[-1] = 2
        return [TensorInfo(inputs[0].dtype, tuple(shape))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from .conv_common import array_infos

        axis, length, inverse, onesided = self._params(node, array_infos(inputs), inputs)
        x = np.asarray(inputs[0])
        z = _complex(x)
        if inverse and onesided:
            y = np.fft.irfft(z, n=length, axis=axis)[..., None]
        elif inverse:
            y = _stack(np.fft.ifft(z, n=length, axis=axis))
        else:
            y = _stack(np.fft.fft(z, n=length, axis=axis))
            if onesided:
                y = np.take(y, np.arange(length // 2 + 1), axis=axis)
        return [y.astype(x.dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        axis, length, inverse, onesided = self._params(node, inputs, values)
        require_values(node, "dft_length", length)
        if inverse and onesided:
            raise HostOnly(f"{node.describe()}: the inverse real DFT runs on the host")
        low = Lowering()
        angle = 2 * np.pi * np.arange(length) / length
        twiddle = np.stack([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)
        low.launch(dft, [In(0), Data(twiddle)], Out(0), axis=axis, length=length,
                   n_in=static(inputs[0])[axis], inverse=inverse)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(11)
        real = rng.standard_normal((2, 8, 1)).astype(np.float32)
        cplx = rng.standard_normal((3, 5, 2)).astype(np.float32)
        tol = {"rtol": 1e-4, "atol": 1e-4}
        return [
            OpCase("real_axis1", [real], opset=20, **tol),
            OpCase("complex_axis0", [cplx, None, np.array(0, np.int64)], opset=20, **tol),
            OpCase("onesided_padded", [real, np.array(10, np.int64)], {"onesided": 1},
                   opset=20, **tol),
            OpCase("inverse_truncated", [cplx, np.array(4, np.int64)], {"inverse": 1},
                   opset=20, **tol),
            OpCase("irfft", [cplx], {"inverse": 1, "onesided": 1}, opset=20, **tol),
            OpCase("opset17_axis_attr", [cplx], {"axis": 1}, opset=17, **tol),
        ]


# ------------------------------------------------------------------------------- STFT


class STFT(OpDef):
    """Short-time Fourier transform (host: frames are sliced from tensor values)."""

    op_type = "STFT"
    since_version = 17
    host_only = True
    value_inputs = (1, 3)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if x is None or x.shape is None or len(x.shape) != 3:
            raise self.fail(node, "signal must be [batch, length, 1 or 2]")
        if x.dtype not in FLOATS:
            raise self.fail(node, f"dtype {x.dtype} is not a float type")
        return [TensorInfo(x.dtype, (x.shape[0], None, None, 2))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        step = int(np.asarray(inputs[1]).reshape(-1)[0])
        window = inputs[2] if len(inputs) > 2 else None
        flen = inputs[3] if len(inputs) > 3 else None
        if flen is not None:
            length = int(np.asarray(flen).reshape(-1)[0])
        else:
            length = np.asarray(window).shape[0] if window is not None else x.shape[1]
        if window is None:
            window = np.ones(length)
        if step < 1 or length < 1 or length > x.shape[1]:
            raise self.fail(node, f"frame_step {step} / frame_length {length} do not fit a "
                                  f"signal of length {x.shape[1]}")
        frames = 1 + (x.shape[1] - length) // step
        idx = np.arange(frames)[:, None] * step + np.arange(length)[None]
        z = _complex(x)[:, idx] * np.asarray(window, np.float64)
        y = np.fft.fft(z, axis=-1)
        onesided = bool(self.attr(node, "onesided", 1))
        if onesided:
            y = y[..., : length // 2 + 1]
        return [_stack(y).astype(x.dtype)]

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(12)
        x = rng.standard_normal((2, 32, 1)).astype(np.float32)
        step = np.array(6, np.int64)
        return [
            OpCase("window", [x, step, np.hanning(10).astype(np.float32)], atol=1e-4),
            OpCase("frame_length_twosided", [x, step, None, np.array(8, np.int64)],
                   {"onesided": 0}, atol=1e-4),
        ]


# ----------------------------------------------------------------------------- windows


@kernel
def cosine_window(out: Output, period: int, a0: float, a1: float, a2: float):
    """a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)."""
    t = (2.0 * math.pi / period) * cast(out.flat, f32)
    return cast(a0 - a1 * cos(t) + a2 * cos(2.0 * t), out.dtype)


class _Window(OpDef):
    since_version = 17
    value_inputs = (0,)
    coeffs: tuple[float, float, float]

    def _size(self, node: Node, values) -> int | None:
        found = input_ints(self, node, values, 0)
        if found is not None and (len(found) != 1 or found[0] < 0):
            raise self.fail(node, f"size must be a non-negative scalar, got {found}")
        return None if found is None else found[0]

    def _dtype(self, node: Node) -> DType:
        return from_onnx(int(self.attr(node, "output_datatype", 1)))

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        n = self._size(node, values)
        return [TensorInfo(self._dtype(node), (n,))]

    def _period(self, node: Node, n: int) -> int:
        return n if int(self.attr(node, "periodic", 1)) else n - 1

    def reference(self, node, inputs) -> list[np.ndarray]:
        n = self._size(node, inputs)
        assert n is not None
        a0, a1, a2 = self.coeffs
        with np.errstate(all="ignore"):
            t = 2 * np.pi * np.arange(n) / self._period(node, n)
        y = a0 - a1 * np.cos(t) + a2 * np.cos(2 * t)
        return [y.astype(self._dtype(node).numpy)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        n = self._size(node, values)
        require_values(node, "the size input", n)
        assert n is not None
        low = Lowering()
        a0, a1, a2 = self.coeffs
        low.launch(cosine_window, [], Out(0), period=self._period(node, n), a0=a0, a1=a1,
                   a2=a2)
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("periodic", [np.array(10, np.int64)], atol=1e-6),
            OpCase("symmetric", [np.array(7, np.int32)], {"periodic": 0}, atol=1e-6),
            OpCase("double", [np.array(5, np.int64)], {"output_datatype": 11}, atol=1e-6),
            OpCase("size1_periodic", [np.array(1, np.int64)]),
        ]


class HannWindow(_Window):
    op_type = "HannWindow"
    coeffs = (0.5, 0.5, 0.0)


class HammingWindow(_Window):
    op_type = "HammingWindow"
    coeffs = (25.0 / 46.0, 21.0 / 46.0, 0.0)


class BlackmanWindow(_Window):
    op_type = "BlackmanWindow"
    coeffs = (0.42, 0.5, 0.08)


OPS: list[type[OpDef]] = [DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
                          MelWeightMatrix]
