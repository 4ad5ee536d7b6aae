"""The plugin-author kit: a base test class a backend's own test suite subclasses.

    from spawnml_conformance.kit import BackendConformance

    class TestMyBackend(BackendConformance):
        backend_name = "mine"

The subclass inherits the standard tests (each parametrised over the kernel suite or the
generated op cases by the pytest plugin). Overriding a standard test is allowed only with
``@pytest.mark.xfail(reason=...)``: defining the class raises ``TypeError`` otherwise, so a
suite cannot quietly replace a test that fails with one that passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from spawnml.backend import Backend
from spawnml.dtypes import DType

from . import checks
from .cases import ConformanceCase
from .checks import FAIL, REFERENCE_EXECUTOR, XFAIL, Verdict  # noqa: F401 - REFERENCE_EXECUTOR re-exported


def _xfail_reason(fn: Any) -> str:
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "xfail":
            return str(mark.kwargs.get("reason") or "")
    return ""


class BackendConformance:
    """Standard tests for one backend. Set ``backend_name``; optionally narrow ``ops`` or
    ``max_cases_per_op`` to keep a plugin's own CI short."""

    backend_name: ClassVar[str]
    ops: ClassVar[Sequence[str] | None] = None
    """Op types to check (None: every registered op)."""
    max_cases_per_op: ClassVar[int | None] = 30
    """Generated cases per op, sampled over every kind of case (None: all)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, fn in vars(cls).items():
            if not name.startswith("test_") or not hasattr(BackendConformance, name):
                continue
            if not _xfail_reason(fn):
                raise TypeError(
                    f"{cls.__name__}.{name} overrides a standard conformance test; mark it "
                    "@pytest.mark.xfail(reason='why this backend cannot pass it') instead "
                    "of replacing it"
                )

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Backend:
        from spawnml.errors import BackendUnavailableError
        from spawnml.registry import get_backend

        try:
            return get_backend(cls.backend_name)
        except BackendUnavailableError as exc:
            pytest.skip(str(exc))

    # -- standard tests -----------------------------------------------------------------
    def test_registered_through_an_entry_point(self) -> None:
        """The backend is registered by a plugin and its probe answers.

        Troubleshooting: list it under ``[project.entry-points.spawnml]`` in pyproject.toml
        and implement ``spawnml_register_backends(register)`` in that module; reinstall the
        package after changing entry points. ``spawnml plugins`` shows load errors."""
        from spawnml.registry import list_backends

        infos = {i.name: i for i in list_backends()}
        assert self.backend_name in infos, f"registered: {sorted(infos)}"
        info = infos[self.backend_name]
        assert info.available or info.reason, "an unavailable backend must say why"

    def test_capabilities_are_declared(self, backend: Backend) -> None:
        """Capabilities list float32 and every dtype maps to a storable type or is refused.

        Troubleshooting: ``capabilities.dtypes`` must hold the element types stored natively;
        the base class lowers the rest (``storage_dtype``)."""
        caps = backend.capabilities
        assert DType.float32 in caps.dtypes
        assert caps.max_buffer_bytes > 0 and caps.max_kernel_inputs >= 3

    @pytest.mark.parametrize("dt", ["float32", "float16", "int32", "int64", "uint8", "bool"])
    def test_upload_download_roundtrip(self, backend: Backend, dt: str) -> None:
        """Bytes survive upload and download in every storable dtype.

        Troubleshooting: ``_write`` must copy the bytes to the buffer's start and ``_read``
        return exactly ``nbytes`` as uint8; a wrong result usually means an offset or a
        stale pooled buffer."""
        from spawnml.errors import InvalidInputError

        data = np.arange(-7, 13).astype(dt).reshape(4, 5)
        try:
            buf = backend.upload(data)
        except InvalidInputError as exc:
            pytest.skip(f"{dt}: {exc}")
        try:
            np.testing.assert_array_equal(backend.download(buf, data.shape, dt), data)
        finally:
            backend.free(buf)

    def test_kernel_suite(self, backend: Backend, kernel_case: Any) -> None:
        """One case of the kernel suite (the whole kernel language) against numpy.

        Troubleshooting: the case name says which construct broke (``int_floordiv``,
        ``nan_minmax``...). Dump the rendered source with ``SPAWNML_DUMP_KERNELS=dir``;
        see docs/kernels.md for the semantics every target must implement."""
        outcome = checks.run_kernel_case(backend, kernel_case)
        _assert(checks.verdict(backend.name, None, [outcome]))

    def test_op_case(self, backend: Backend, op_case: ConformanceCase) -> None:
        """One generated case of one op against the op's numpy reference.

        Troubleshooting: ``[edge:...]`` cases inject NaN/Inf/subnormals/huge values (declare
        ``flushes_denormals`` in ``capabilities.extras`` if your target flushes them);
        ``[float16]`` and integer variants test storage lowering (``storage_dtype``). A case
        that fails on cpu too is an op issue: xfail here (``checks.verdict``, the same rule
        as ``spawnml-conformance``)."""
        outcomes = checks.run_case(backend, op_case)
        _assert(checks.verdict(backend.name, op_case, outcomes,
                               lambda: checks.reference_outcomes(op_case)))


def _xfail_if_the_reference_executor_fails(case: ConformanceCase, outcome: checks.Outcome) -> None:
    """A case that fails on cpu too is the op's problem (its reference or its kernel), not
    this backend's: it is reported as xfail with both reasons, never as a pass (kept for
    callers of the earlier API; :func:`checks.verdict` decides)."""
    found = checks.verdict("", case, [outcome], lambda: checks.reference_outcomes(case))
    if found.status == XFAIL:
        pytest.xfail(found.reason)


def _assert(found: Verdict) -> None:
    """Turn the verdict into pytest's: pass, ``pytest.skip``, ``pytest.xfail`` or a failure."""
    if found.status == checks.VERDICT_SKIP:
        pytest.skip(found.reason)
    if found.status == XFAIL:
        pytest.xfail(found.reason)
    assert found.status != FAIL, found.reason
