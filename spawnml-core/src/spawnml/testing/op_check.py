"""Check an OpDef's own cases (``OpDef.cases()``): a backend against the op's numpy
reference, and the reference against ``onnx.reference`` on a single-node model.

Exclusions come only from a backend's declared capabilities (``unsupported_reason``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backend import Backend
from ..dtypes import DType, dtype as as_dtype
from ..execute import run_node
from ..op import Node, OpCase, OpDef, TensorInfo

F16_TOL = {"rtol": 2e-3, "atol": 2e-3}  # about one float16 ulp
BF16_TOL = {"rtol": 2**-7, "atol": 2**-7}  # one bfloat16 ulp (8 significant bits)
_INT32 = np.iinfo(np.int32)
_UINT32 = np.iinfo(np.uint32)


class OnnxReferenceUnavailable(Exception):
    """onnx.reference itself fails on a case (e.g. a 0-d input it mishandles)."""


def case_params(ops: Sequence[type[OpDef]]) -> list[Any]:
    """``pytest.param(op, case, id="Op-case")`` for every case of every op class."""
    import pytest

    params = []
    for cls in ops:
        op = cls()
        params += [pytest.param(op, c, id=f"{op.op_type}-{c.name}") for c in op.cases()]
    return params


def backend_or_skip(name: str) -> Backend:
    """The backend, or pytest.skip with the probe's reason where it cannot run here."""
    import pytest

    from ..errors import SpawnMLError
    from ..registry import get_backend

    try:
        return get_backend(name)
    except SpawnMLError as exc:
        pytest.skip(f"backend {name} unavailable: {exc}")
        raise


def infer_node(
    op_type: str,
    attrs: dict[str, Any],
    dtypes: Sequence[str],
    opset: int,
    shape: tuple[int, ...] = (2, 3),
) -> list[Any]:
    """Run the registered op's ``infer`` on one node (attribute and dtype validation tests)."""
    from ..registry import find_op

    node = Node(op_type, [f"x{i}" for i in range(len(dtypes))], ["y"], dict(attrs), opset=opset)
    infos = [TensorInfo(as_dtype(d), shape) for d in dtypes]
    return find_op("", op_type, opset).infer(node, infos, [None] * len(infos))


def case_opset(op: OpDef, case: OpCase) -> int:
    if case.opset is not None:
        return case.opset
    return op.until_version - 1 if op.until_version is not None else max(op.since_version, 21)


def case_node(op: OpDef, case: OpCase) -> Node:
    """The single node a case runs: inputs named x0, x1 ... ("" for omitted ones)."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(case.inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = [f"y{i}" for i in range(case.n_outputs)]
    return Node(
        op.op_type,
        names,
        outs,
        dict(case.attrs),
        name=case.name,
        domain=op.domain,
        opset=case_opset(op, case),
    )


def unsupported_reason(backend: Backend, case: OpCase, op: OpDef | None = None) -> str | None:
    """Why ``backend`` cannot run ``case``, from its declared capabilities (None: it can).

    With ``op``, int64 results (from the reference) are range-checked too."""
    caps = backend.capabilities
    arrays = [("input", i, a) for i, a in enumerate(case.inputs) if a is not None]
    if op is not None and DType.int64 not in caps.dtypes and case.raises is None:
        with np.errstate(all="ignore"):
            outs = op.reference(case_node(op, case), case.inputs)
        arrays += [("output", i, o) for i, o in enumerate(outs)]
    for kind, i, a in arrays:
        a = np.asarray(a)
        if a.dtype == np.int64 and DType.int64 not in caps.dtypes and a.size:
            if a.min() < _INT32.min or a.max() > _INT32.max:
                return f"{kind} {i} exceeds int32; {backend.name} stores int64 as int32"
        if a.dtype == np.uint64 and DType.uint64 not in caps.dtypes and a.size:
            if a.max() > _UINT32.max:
                return f"{kind} {i} exceeds uint32; {backend.name} stores uint64 as uint32"
        if caps.extras.get("flushes_denormals") and a.dtype.kind == "f":
            tiny = np.finfo(np.float32).tiny
            if kind == "input" and np.any((a != 0) & (np.abs(a.astype(np.float64)) < tiny)):
                return f"input {i} holds subnormals; {backend.name} flushes them to zero"
    return None


def tolerance(case: OpCase, dt: np.dtype, backend: Backend | None = None) -> dict[str, float]:
    """The case's tolerance, widened to one f16 (bfloat16) ulp for float16 (bfloat16) results
    and to f32 precision where a backend stores float64 as float32."""
    rtol, atol = case.rtol, case.atol
    narrow = {np.dtype(np.float16): F16_TOL, DType.bfloat16.numpy: BF16_TOL}.get(np.dtype(dt))
    if narrow is not None:
        rtol, atol = max(rtol, narrow["rtol"]), max(atol, narrow["atol"])
    lowered_f64 = backend is not None and DType.float64 not in backend.capabilities.dtypes
    if lowered_f64 and dt == np.float64:
        rtol, atol = max(rtol, 1e-5), max(atol, 1e-6)
    return {"rtol": rtol, "atol": atol}


def assert_close(got: Any, expected: Any, tol: dict[str, float], what: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    if expected.dtype.kind == "f" or expected.dtype == DType.bfloat16.numpy:
        np.testing.assert_allclose(
            got.astype(np.float64), expected.astype(np.float64), equal_nan=True, err_msg=what, **tol
        )
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def check_backend(backend: Backend, op: OpDef, case: OpCase) -> None:
    """Run ``case`` on ``backend`` and compare with the op's reference (or, for a case that
    ``raises``, check that both raise that error)."""
    node = case_node(op, case)
    if case.raises is not None:
        import pytest

        for what, run in (("reference", lambda: op.reference(node, case.inputs)),
                          (backend.name, lambda: run_node(backend, op, node, case.inputs))):
            with pytest.raises(case.raises):
                run()
                raise AssertionError(f"{op.op_type} case {case.name}: {what} did not raise")
        return
    with np.errstate(all="ignore"):
        expected = op.reference(node, case.inputs)
        got = run_node(backend, op, node, case.inputs)
    assert len(got) == len(expected), f"{case.name}: {len(got)} outputs != {len(expected)}"
    for g, e in zip(got, expected):
        assert_close(
            g,
            e,
            tolerance(case, np.asarray(e).dtype, backend),
            f"{op.op_type} case {case.name} on {backend.name}",
        )


def onnx_reference(op: OpDef, case: OpCase) -> list[np.ndarray]:
    """Outputs of ``onnx.reference.ReferenceEvaluator`` on the case's single-node model."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = case_node(op, case)
    ref_out = op.reference(node, case.inputs)
    inputs = [
        helper.make_tensor_value_info(n, as_dtype(np.asarray(a).dtype).onnx, np.shape(a))
        for n, a in zip(node.inputs, case.inputs)
        if n
    ]
    outputs = [
        helper.make_tensor_value_info(n, as_dtype(r.dtype).onnx, r.shape)
        for n, r in zip(node.outputs, ref_out)
    ]
    from onnx import numpy_helper

    # tensor-valued attributes (Constant's value, ConstantOfShape's value) as TensorProtos
    attrs = {
        k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
        for k, v in case.attrs.items()
    }
    proto = helper.make_node(
        op.op_type, node.inputs, node.outputs, domain=op.domain or None, **attrs
    )
    graph = helper.make_graph([proto], "case", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(op.domain, node.opset)])
    feed = {n: np.asarray(a) for n, a in zip(node.inputs, case.inputs) if n}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return list(ReferenceEvaluator(model).run(None, feed))
        except Exception as exc:
            raise OnnxReferenceUnavailable(
                f"onnx.reference cannot run {op.op_type} case {case.name}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc


def check_onnx_reference(op: OpDef, case: OpCase, skip_output: Sequence[int] = ()) -> None:
    """Compare the op's numpy reference with onnx.reference on ``case`` (a case that
    ``raises`` has no outputs to compare: ``check_backend`` checks its error)."""
    if case.raises is not None:
        return
    node = case_node(op, case)
    with np.errstate(all="ignore"):
        ours = op.reference(node, case.inputs)
    theirs = onnx_reference(op, case)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if i not in skip_output:
            assert_close(
                a,
                np.asarray(b),
                tolerance(case, np.asarray(a).dtype),
                f"{op.op_type} case {case.name}: reference vs onnx.reference",
            )


def standard_tests(
    ops: Sequence[type[OpDef]], device: str = "webgpu",
    reference_gaps: dict[tuple[str, str], str] | None = None,
) -> tuple[Any, Any, Any]:
    """The three tests every op family runs over its ops' cases: cpu vs the numpy
    reference, the reference vs onnx.reference (skipped for ``reference_gaps``: (op type,
    case) -> where onnx.reference itself is wrong), and ``device`` vs the reference (skips
    only from declared capabilities). Use: ``test_cpu, test_ref, test_device =
    standard_tests(OPS)``."""
    import pytest

    params = case_params(ops)

    @pytest.mark.parametrize(("op", "case"), params)
    def test_cpu_matches_reference(op: OpDef, case: OpCase) -> None:
        check_backend(backend_or_skip("cpu"), op, case)

    @pytest.mark.parametrize(("op", "case"), params)
    def test_reference_matches_onnx_reference(op: OpDef, case: OpCase) -> None:
        gap = (reference_gaps or {}).get((op.op_type, case.name))
        if gap:
            pytest.skip(f"onnx.reference: {gap}")
        try:
            check_onnx_reference(op, case)
        except OnnxReferenceUnavailable as exc:
            pytest.skip(str(exc))

    @pytest.mark.parametrize(("op", "case"), params)
    def test_device_matches_reference(op: OpDef, case: OpCase) -> None:
        backend = backend_or_skip(device)
        reason = unsupported_reason(backend, case, op)
        if reason:
            pytest.skip(reason)
        check_backend(backend, op, case)

    return (
        test_cpu_matches_reference,
        test_reference_matches_onnx_reference,
        test_device_matches_reference,
    )
