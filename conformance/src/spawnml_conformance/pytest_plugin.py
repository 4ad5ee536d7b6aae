"""pytest plugin (entry point ``pytest11``): parametrises the kits' test classes.

``BackendConformance`` subclasses (:mod:`.kit`): ``kernel_case`` runs over the kernel suite
and ``op_case`` over the generated cases of the class's ops. ``OpConformance`` subclasses
(:mod:`.op_kit`): ``op_case`` over the generated cases of the class's ops times
``backend_name`` over its backends. ``--spawnml-ops A,B`` narrows the ops from the command
line. Op names are ``OpType`` or ``domain::OpType`` (:func:`.op_kit.select_ops`); case ids
name custom-domain ops with their domain (``com.example::Swish alpha_2``).
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("spawnml-conformance")
    group.addoption("--spawnml-ops", default=None, metavar="A,B",
                    help="ops the inherited conformance tests check, as OpType or "
                         "domain::OpType (default: the class's ops)")


def _names(only: str | None) -> list[str] | None:
    return [n for n in (p.strip() for p in only.split(",")) if n] if only else None


def _op_cases(cls: Any, only: str | None) -> list[Any]:
    """BackendConformance: the cases of ``cls.ops`` (None: every registered op), narrowed by
    ``--spawnml-ops``; names that select nothing are ignored."""
    from spawnml.registry import op_definitions

    from .op_kit import op_cases, select_ops

    names = _names(only) or (list(cls.ops) if cls.ops is not None else None)
    if names is None:
        ops = [op for _, versions in sorted(op_definitions().items(), key=lambda kv: kv[0][1])
               for op in versions]
    else:
        ops = select_ops(names, strict=False)
    return op_cases(ops, cls.max_cases_per_op)


def _op_kit_cases(cls: Any, only: str | None) -> list[Any]:
    """OpConformance: the cases of ``cls.ops`` (every name must select a registered op),
    narrowed by ``--spawnml-ops`` to those it also selects."""
    from .op_kit import op_cases, select_ops

    if not cls.ops:
        raise ValueError(f"{cls.__name__}.ops is empty: name the ops to check, e.g. "
                         "ops = ['com.example::Swish']")
    ops = select_ops(cls.ops)
    narrow = _names(only)
    if narrow is not None:
        kept = {id(op) for op in select_ops(narrow, strict=False)}
        ops = [op for op in ops if id(op) in kept]
    return op_cases(ops, cls.max_cases_per_op)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    if cls is None:
        return
    from .kit import BackendConformance
    from .op_kit import OpConformance, backend_names, case_id

    only = metafunc.config.getoption("--spawnml-ops")
    if issubclass(cls, OpConformance):
        if "op_case" in metafunc.fixturenames:
            cases = _op_kit_cases(cls, only)
            metafunc.parametrize("op_case", cases, ids=[case_id(c) for c in cases])
        if "backend_name" in metafunc.fixturenames:
            names = backend_names(cls.backends)
            metafunc.parametrize("backend_name", names, ids=names)
        return
    if not issubclass(cls, BackendConformance):
        return
    if "kernel_case" in metafunc.fixturenames:
        from spawnml.testing.kernel_suite import CASES

        metafunc.parametrize("kernel_case", CASES, ids=[c.name for c in CASES])
    if "op_case" in metafunc.fixturenames:
        cases = _op_cases(cls, only)
        metafunc.parametrize("op_case", cases, ids=[case_id(c) for c in cases])
