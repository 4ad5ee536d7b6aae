"""pytest plugin (entry point ``pytest11``): parametrises ``BackendConformance`` subclasses.

``kernel_case`` runs over the kernel suite and ``op_case`` over the generated cases of the
class's ops; ``--spawnml-ops A,B`` narrows the ops from the command line.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("spawnml-conformance")
    group.addoption("--spawnml-ops", default=None, metavar="A,B",
                    help="op types the inherited conformance tests check (default: all)")


def _op_cases(cls: Any, only: str | None) -> list[Any]:
    from spawnml.registry import op_definitions

    from .cases import generate, sample

    wanted = set(only.split(",")) if only else (set(cls.ops) if cls.ops is not None else None)
    found = []
    for (_, op_type), versions in sorted(op_definitions().items(), key=lambda kv: kv[0][1]):
        if wanted is not None and op_type not in wanted:
            continue
        for op in versions:
            found += sample(generate(op), cls.max_cases_per_op)
    return found


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    if cls is None:
        return
    from .kit import BackendConformance

    if not issubclass(cls, BackendConformance):
        return
    if "kernel_case" in metafunc.fixturenames:
        from spawnml.testing.kernel_suite import CASES

        metafunc.parametrize("kernel_case", CASES, ids=[c.name for c in CASES])
    if "op_case" in metafunc.fixturenames:
        cases = _op_cases(cls, metafunc.config.getoption("--spawnml-ops"))
        metafunc.parametrize("op_case", cases, ids=[c.label for c in cases])
