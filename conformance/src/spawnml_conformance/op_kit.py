"""The op-author kit: a base test class an op plugin's own test suite subclasses.

    from spawnml_conformance.op_kit import OpConformance

    class TestSwish(OpConformance):
        ops = ["com.example::Swish"]

The subclass inherits one test, ``test_op_case``, which the pytest plugin parametrises over
every generated conformance case of those ops (their ``cases()``, the shape cases of an
elementwise op, every declared dtype, injected edge values; see ``cases.generate``) times
every selected backend. Only the ops are checked: neither the kernel suite nor the backend
contract tests run (``BackendConformance`` is the kit for backend authors).

Test ids name the op with its domain: ``test_op_case[com.example::Swish alpha_2-cpu]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import pytest

from spawnml.backend import Backend
from spawnml.op import OpDef

from . import checks
from .cases import ConformanceCase, generate, sample

__all__ = ["OpConformance", "case_id", "op_cases", "qualified_name", "select_ops"]

DEFAULT_DOMAIN = "ai.onnx"


def qualified_name(op: OpDef) -> str:
    """``domain::OpType`` for a custom-domain op, the bare ``OpType`` for an ai.onnx one."""
    domain = "" if op.domain == DEFAULT_DOMAIN else op.domain
    return f"{domain}::{op.op_type}" if domain else op.op_type


def case_id(case: ConformanceCase) -> str:
    """A case's test id: ``com.example::Swish alpha_2[float16]`` (``Relu f32`` for ai.onnx)."""
    return f"{qualified_name(case.op)} {case.name}"


def _split(name: str) -> tuple[str | None, str]:
    """``"domain::Op"`` -> (domain, Op), ``"::Op"``/``"ai.onnx::Op"`` -> ("", Op),
    ``"Op"`` -> (None, Op): any domain."""
    if "::" not in name:
        return None, name.strip()
    domain, op_type = name.rsplit("::", 1)
    domain = domain.strip()
    return ("" if domain == DEFAULT_DOMAIN else domain), op_type.strip()


def select_ops(names: Iterable[str], *, strict: bool = True,
               registry: dict[tuple[str, str], list[Any]] | None = None) -> list[OpDef]:
    """Every registered OpDef (every opset range) that ``names`` select, in registry order.

    A name is ``OpType`` (that op type in every domain) or ``domain::OpType`` (only in that
    domain; ``ai.onnx::Relu`` and ``::Relu`` name the default domain). With ``strict``, a name
    that selects nothing raises ValueError listing the ops registered in its domain."""
    if registry is None:
        from spawnml.registry import op_definitions

        registry = op_definitions()
    wanted = [(_split(n), n) for n in names]
    found: list[OpDef] = []
    for (domain, op_type), versions in sorted(registry.items(), key=lambda kv: kv[0][::-1]):
        if any(op_type == t and (d is None or d == domain) for (d, t), _ in wanted):
            found.extend(versions)
    if strict:
        for (domain, op_type), name in wanted:
            if not any(op.op_type == op_type and (domain is None or _domain(op) == domain)
                       for op in found):
                raise ValueError(_unknown(name, domain, op_type, registry))
    return found


def _domain(op: OpDef) -> str:
    return "" if op.domain == DEFAULT_DOMAIN else op.domain


def _unknown(name: str, domain: str | None, op_type: str,
             registry: dict[tuple[str, str], list[Any]]) -> str:
    if domain is None:
        everything = sorted({t if not d else f"{d}::{t}" for d, t in registry})
        close = difflib.get_close_matches(op_type, [t for _, t in registry], n=3)
        hint = f"; close: {', '.join(sorted(set(close)))}" if close else ""
        return (f"no op {name!r} is registered in any domain{hint} ({len(everything)} "
                "registered; name a custom-domain op as 'domain::OpType')")
    where = f"domain {domain!r}" if domain else "the ai.onnx domain"
    there = sorted(t for d, t in registry if d == domain)
    if not there:
        domains = sorted({d or DEFAULT_DOMAIN for d, _ in registry})
        return (f"no op {name!r}: nothing is registered in {where} (domains: "
                f"{', '.join(domains)}; is the plugin installed? `spawnml plugins` lists them)")
    return f"no op {name!r}: {where} has {', '.join(there)}"


def op_cases(ops: Sequence[OpDef], max_cases_per_op: int | None = None) -> list[ConformanceCase]:
    """The generated conformance cases of ``ops``, at most ``max_cases_per_op`` each."""
    found: list[ConformanceCase] = []
    for op in ops:
        found += sample(generate(op), max_cases_per_op)
    return found


def backend_names(backends: Sequence[str] | None) -> list[str]:
    """``backends``, or every available backend when None."""
    if backends is not None:
        return list(backends)
    from spawnml.registry import get_available_backends

    return get_available_backends()


class OpConformance:
    """Standard tests for an op plugin's ops: every case of ``ops`` on every backend.

    ``ops`` takes op types as ``"domain::OpType"`` (``"com.example::Swish"``: that domain
    only) or bare ``"OpType"`` (that op type in every domain); every opset version of each
    registered OpDef is checked. A name that selects no registered op fails collection with
    the ops registered in its domain. ``backends`` narrows the backends (None: every
    available one; a named backend that is unavailable is skipped with its reason)."""

    ops: ClassVar[Sequence[str]] = ()
    """The ops to check: ``"domain::OpType"`` or ``"OpType"``."""
    backends: ClassVar[Sequence[str] | None] = None
    """Backend names (None: every available backend)."""
    max_cases_per_op: ClassVar[int | None] = None
    """Generated cases per op, sampled over every kind of case (None: all)."""

    @pytest.fixture
    def backend(self, backend_name: str) -> Backend:
        from spawnml.errors import BackendUnavailableError
        from spawnml.registry import get_backend

        try:
            return get_backend(backend_name)
        except BackendUnavailableError as exc:
            pytest.skip(str(exc))

    def test_op_case(self, backend: Backend, op_case: ConformanceCase) -> None:
        """One generated case of one op on one backend against the op's ``reference``.

        Troubleshooting: the case name says what varies (``[float16]``: a declared dtype,
        ``[edge:nan_inf]``: injected NaN/±Inf, ``shapes_...``: a generated shape). A failure
        on every backend is the op's (``reference`` or ``lower``); on one backend only, look
        at its generated code with ``SPAWNML_DUMP_KERNELS=dir``. Skips give the reason (a
        dtype the backend cannot store, subnormals on a backend that flushes them).

        The verdict is ``checks.verdict``'s, without its reference-executor rule: the op is
        what is under test here, so a case failing on cpu too is a failure, not an xfail."""
        from .kit import _assert

        _assert(checks.verdict(backend.name, op_case, checks.run_case(backend, op_case)))
