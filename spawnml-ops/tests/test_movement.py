"""The movement family: every declared case on cpu and webgpu against the op's numpy reference
(per-case tolerances, float16 one ulp), and the reference against onnx.reference."""

from __future__ import annotations

import pytest
from family_check import check_reference, family_cases, run_on

from spawnml_ops import movement

CASES = family_cases(movement.OPS)
GAPS: dict[tuple[str, str], str] = {
    ("Pad", "negative_crop"): "rejects negative pads",
    ("Scatter", "axis0"): "has no Scatter (deprecated name of ScatterElements)",
    ("Scatter", "axis1_int32"): "has no Scatter (deprecated name of ScatterElements)",
}


@pytest.mark.parametrize("op,case", CASES)
def test_cpu(op, case) -> None:
    run_on("cpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_webgpu(op, case) -> None:
    run_on("webgpu", op, case)


@pytest.mark.parametrize("op,case", CASES)
def test_reference_matches_onnx(op, case) -> None:
    check_reference(op, case, GAPS)


@pytest.mark.parametrize("op_type,n_inputs", [("Slice", 3), ("Expand", 2), ("Tile", 2),
                                              ("Pad", 2), ("Split", 2)])
def test_unknown_value_inputs_run_on_host(op_type: str, n_inputs: int) -> None:
    from spawnml.dtypes import DType
    from spawnml.op import HostOnly, Node, TensorInfo

    op = next(c() for c in movement.OPS if c.op_type == op_type)
    node = Node(op_type, ["x"] + [f"v{i}" for i in range(1, n_inputs)], ["y", "z"][:1 + (
        op_type == "Split")], opset=19)
    infos = [TensorInfo(DType.float32, (4, 6))] + [TensorInfo(DType.int64, (2,))] * (n_inputs - 1)
    values = [None] * n_inputs
    outs = op.infer(node, infos, values)
    with pytest.raises(HostOnly):
        op.lower(node, infos, outs, values)


def test_slice_rejects_zero_step() -> None:
    import numpy as np

    from spawnml.errors import InvalidModelError
    from spawnml.op import Node

    x = np.zeros((3, 3), np.float32)
    node = Node("Slice", ["x", "s", "e", "a", "p"], ["y"], opset=13)
    with pytest.raises(InvalidModelError, match="step"):
        movement.Slice().reference(node, [x] + [np.array([0], np.int64)] * 3
                                   + [np.array([0], np.int64)])
