"""The shape family: every declared case on cpu and webgpu against the op's numpy reference
(per-case tolerances, float16 one ulp), and the reference against onnx.reference."""

from __future__ import annotations

import pytest
from family_check import check_reference, family_cases, run_on

from spawnml_ops import shape

CASES = family_cases(shape.OPS)
GAPS: dict[tuple[str, str], str] = {
    ("Flatten", "size0"): "cannot reshape a size-0 tensor with -1",
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


def test_reshape_is_an_alias_without_launches() -> None:
    import numpy as np

    from spawnml.dtypes import DType
    from spawnml.op import Node, TensorInfo

    op = shape.Reshape()
    node = Node("Reshape", ["x", "s"], ["y"], opset=14)
    infos = [TensorInfo(DType.float32, (2, 6)), TensorInfo(DType.int64, (2,))]
    values = [None, np.array([3, -1], np.int64)]
    outs = op.infer(node, infos, values)
    assert outs[0].shape == (3, 4)
    low = op.lower(node, infos, outs, values)
    assert low.aliases == {0: 0} and not low.launches


@pytest.mark.parametrize("op_type", ["Reshape", "Squeeze", "Unsqueeze"])
def test_unknown_shape_input_runs_on_host(op_type: str) -> None:
    from spawnml.dtypes import DType
    from spawnml.op import HostOnly, Node, TensorInfo

    op = next(c() for c in shape.OPS if c.op_type == op_type)
    node = Node(op_type, ["x", "s"], ["y"], opset=18)
    infos = [TensorInfo(DType.float32, (1, 6)), TensorInfo(DType.int64, (1,))]
    outs = op.infer(node, infos, [None, None])
    assert outs[0].shape is None or not outs[0].is_static
    with pytest.raises(HostOnly, match="host"):
        op.lower(node, infos, outs, [None, None])


def test_reshape_rejects_bad_shapes() -> None:
    import numpy as np

    from spawnml.dtypes import DType
    from spawnml.errors import InvalidModelError
    from spawnml.op import Node, TensorInfo

    op = shape.Reshape()
    infos = [TensorInfo(DType.float32, (2, 6)), TensorInfo(DType.int64, (2,))]
    for bad, msg in [([5, -1], "cannot reshape"), ([-1, -1], "at most one"), ([-2, 6], "invalid")]:
        with pytest.raises(InvalidModelError, match=msg):
            op.infer(Node("Reshape", ["x", "s"], ["y"], opset=14), infos,
                     [None, np.array(bad, np.int64)])
