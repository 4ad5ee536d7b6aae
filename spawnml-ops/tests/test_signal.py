"""Signal ops (DFT, STFT, windows): every declared case on cpu and webgpu against the numpy
reference, the reference against onnx.reference, kernel coverage and validation."""

from __future__ import annotations

import numpy as np
import pytest
from family_check import check_reference, family_cases, run_on
from misc_lowering import assert_lowers

import spawnml
from spawnml.errors import InvalidModelError
from spawnml.execute import run_node
from spawnml.op import Node
from spawnml_ops import signal
from spawnml_ops.signal import DFT, BlackmanWindow, HammingWindow, HannWindow

CASES = family_cases(signal.OPS)
KERNEL_CASES = [p for p in family_cases([DFT, HannWindow, HammingWindow, BlackmanWindow])
                if p.values[1].name != "irfft"]


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, {})


@pytest.mark.parametrize("op,case", KERNEL_CASES)
def test_runs_as_kernels(op, case) -> None:
    assert_lowers(op, case)


def test_dft_kernel_matches_numpy_fft() -> None:
    x = np.random.default_rng(1).standard_normal((3, 16, 2)).astype(np.float32)
    node = Node("DFT", ["x"], ["y"], {"axis": 1}, opset=17)
    (y,) = run_node(spawnml.get_backend("cpu"), DFT(), node, [x])
    expected = np.fft.fft(x[..., 0] + 1j * x[..., 1], axis=1)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], expected, atol=1e-4)


def test_dft_axis_cannot_be_components() -> None:
    node = Node("DFT", ["x"], ["y"], {"axis": 2}, name="dft", opset=17)
    with pytest.raises(InvalidModelError, match=r"dft.*component"):
        DFT().reference(node, [np.zeros((1, 4, 2), np.float32)])
