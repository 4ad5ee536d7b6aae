"""Shared parametrisation for the op-family tests: every case an op declares, checked on
cpu and webgpu against the op's reference, and the reference against onnx.reference."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from spawnml.op import OpCase, OpDef


def family_cases(ops: Iterable[type[OpDef]]) -> list[Any]:
    """pytest params (op, case) with ids ``Op-case``."""
    params = []
    for cls in ops:
        op = cls()
        for case in op.cases():
            params.append(pytest.param(op, case, id=f"{op.op_type}-{case.name}"))
    return params


def backend_or_skip(name: str) -> Any:
    import spawnml

    if name not in spawnml.get_available_backends():
        pytest.skip(f"backend {name} is not available here")
    return spawnml.get_backend(name)


def run_on(name: str, op: OpDef, case: OpCase) -> None:
    from spawnml.testing.op_check import check_backend, unsupported_reason

    backend = backend_or_skip(name)
    reason = unsupported_reason(backend, case, op)
    if reason:
        pytest.skip(reason)
    check_backend(backend, op, case)


def check_reference(op: OpDef, case: OpCase, known_gaps: dict[tuple[str, str], str]) -> None:
    """Our numpy reference against onnx.reference (``known_gaps``: where it cannot run)."""
    from spawnml.testing.op_check import check_onnx_reference

    gap = known_gaps.get((op.op_type, case.name))
    if gap:
        pytest.skip(f"onnx.reference: {gap}")
    check_onnx_reference(op, case)
