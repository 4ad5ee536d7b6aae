"""Case generation from an op's declared domain, its variants and sampling."""

from __future__ import annotations

import numpy as np
from conf_sample_ops import SampleAdd, SampleRelu

from spawnml.op import OpCase
from spawnml_conformance.cases import generate, sample
from spawnml_conformance.values import EDGES


def _shapes(cases):
    return {tuple(a.shape for a in c.inputs) for c in cases}


def test_elementwise_domain_covers_scalars_size0_size1_and_broadcasting() -> None:
    cases = [c for c in generate(SampleAdd(), onnx_seeds=False) if not c.variant]
    shapes = _shapes(cases)
    assert ((), ()) in shapes and ((), (3, 2)) in shapes  # scalars
    assert ((0, 3), (3,)) in shapes  # size-0 dims
    assert ((1,), (1,)) in shapes and ((2, 1, 3), (1, 4, 1)) in shapes  # size-1, broadcast
    for c in cases:
        assert c.outputs[0].shape == np.broadcast_shapes(*(a.shape for a in c.inputs))


def test_every_declared_dtype_and_edge_family_is_generated() -> None:
    op = SampleAdd()
    cases = generate(op, onnx_seeds=False)
    dtypes = {c.inputs[0].dtype.name for c in cases}
    assert dtypes == {d.value for d in op.dtypes}
    variants = {c.variant for c in cases}
    for family in ("nan_inf", "subnormal", "large", "huge"):
        assert f"edge:{family}" in variants and f"float16,edge:{family}" in variants
    nan_case = next(c for c in cases if c.variant == "edge:nan_inf" and c.inputs[0].size > 4)
    values = np.concatenate([a.reshape(-1) for a in nan_case.inputs])
    assert np.isnan(values).any() and np.isposinf(values).any() and np.isneginf(values).any()
    assert any(np.signbit(v) and v == 0 for v in values)  # negative zero


def _has_large(a: np.ndarray) -> bool:
    return bool(np.isin(a, EDGES[a.dtype.name]["large"][:2]).any())


def test_large_values_go_into_one_input_of_a_reduction() -> None:
    # a sum of large x large products cancels beyond the large family's tolerance in
    # float32 whatever the kernel; an elementwise op gets them in every input
    from spawnml.registry import op_definitions

    matmul = op_definitions()[("", "MatMul")][-1]
    large = [c for c in generate(matmul, onnx_seeds=False) if c.variant == "edge:large"]
    assert large
    for c in large:
        hit = [i for i, a in enumerate(c.inputs) if _has_large(a)]
        assert hit == [0], c.name
    add = [c for c in generate(SampleAdd(), onnx_seeds=False)
           if c.variant == "edge:large" and all(a.size >= 4 for a in c.inputs)]
    assert any(all(_has_large(a) for a in c.inputs) for c in add)


def test_declared_cases_are_kept_and_an_infer_error_is_a_failure() -> None:
    class Broken(SampleRelu):
        def cases(self):
            return [OpCase("int_input", [np.arange(3, dtype=np.int32)])]

    (case,) = [c for c in generate(Broken(), onnx_seeds=False) if c.origin == "op"]
    assert "unsupported dtype" in case.infer_error


def test_onnx_node_tests_seed_cases() -> None:
    cases = generate(SampleRelu())
    assert any(c.name == "onnx:test_relu" for c in cases)


def test_sampling_is_deterministic_and_keeps_every_kind() -> None:
    cases = generate(SampleAdd(), onnx_seeds=False)
    picked = sample(cases, 12)
    assert len(picked) == 12 and [c.name for c in picked] == [c.name for c in sample(cases, 12)]
    assert {c.group for c in picked} == {c.group for c in cases}
