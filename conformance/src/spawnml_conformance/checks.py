"""Run one conformance case on one backend and judge it: the outcomes the matrix counts,
and the one verdict per case that both the CLI (``runner``) and the pytest kit (``kit``)
apply (:func:`verdict`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from spawnml.backend import Backend
from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import InvalidInputError, UnsupportedOpError
from spawnml.execute import run_node
from spawnml.op import HostOnly, TensorInfo
from spawnml.registry import backend_kernels
from spawnml.tensor import DeviceTensor
from spawnml.testing.kernel_suite import KernelCase, unsupported_reason

from .cases import ConformanceCase
from .tolerances import Tolerance, compare, tolerance_for
from .values import has_subnormals

PASS, FAIL, SKIP, NOT_IMPLEMENTED, HOST = "pass", "fail", "skipped", "not implemented", "host"
XFAIL = "xfail"  # failed, but fails on the reference executor too: an op issue
DISAGREES = "disagrees"  # the onnx.reference cross-check: op.reference and onnx.reference differ
REFERENCE_EXECUTOR = "cpu"
"""The backend whose result decides whether a failure is the op's or the backend's."""
_INT32 = np.iinfo(np.int32)


@dataclass
class Outcome:
    """What happened to one case on one backend."""

    status: str  # PASS, FAIL, SKIP, NOT_IMPLEMENTED or HOST
    case: str
    max_error: float | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "case": self.case, "max_error": self.max_error,
                "detail": self.detail}


def _beyond_int32(arrays: Sequence[np.ndarray]) -> bool:
    return any(a.dtype == np.int64 and a.size and (a.min() < _INT32.min or a.max() > _INT32.max)
               for a in map(np.asarray, arrays))


def _has_strings(case: ConformanceCase) -> bool:
    """Whether a case reads or writes string tensors (which only the host computes)."""
    return any(as_dtype(a.dtype).is_string for a in case.inputs if a is not None) or any(
        o.dtype.is_string for o in case.outputs)


def exclusion(backend: Backend, case: ConformanceCase) -> str | None:
    """Why ``backend``'s declared capabilities rule ``case`` out (None: they do not)."""
    caps = backend.capabilities
    dtypes = [as_dtype(a.dtype) for a in case.inputs if a is not None]
    dtypes += [o.dtype for o in case.outputs]
    for dt in dict.fromkeys(dtypes):
        if dt.is_string:
            continue  # no backend stores strings: their ops run on the host (run_case)
        try:
            backend.storage_dtype(dt)
        except InvalidInputError:
            return f"{dt} is not among {backend.name}'s dtypes (capabilities)"
    if DType.int64 not in caps.dtypes and _beyond_int32([a for a in case.inputs if a is not None]):
        return f"{backend.name} stores int64 as int32 (capabilities); values exceed int32"
    if caps.extras.get("flushes_denormals"):
        if any(a is not None and has_subnormals(a) for a in case.inputs):
            return f"subnormal inputs; {backend.name} flushes subnormals to zero (capabilities)"
    return None


def judge(case_name: str, got: Sequence[np.ndarray], expected: Sequence[np.ndarray],
           rtol: float, atol: float, shapes_only: bool = False) -> Outcome:
    """Compare every output; ``shapes_only`` for random ops (values are draws)."""
    if len(got) != len(expected):
        return Outcome(FAIL, case_name, None, f"{len(got)} outputs, expected {len(expected)}")
    worst = 0.0
    for k, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        if shapes_only:
            g = np.asarray(g)
            if g.shape != e.shape or g.dtype != e.dtype:
                return Outcome(FAIL, case_name, None,
                               f"output {k}: {g.dtype}{g.shape} != expected {e.dtype}{e.shape}")
            continue
        result = compare(g, e, tolerance_for(e.dtype, rtol, atol))
        worst = max(worst, result.max_error)
        if not result.ok:
            return Outcome(FAIL, case_name, result.max_error, f"output {k}: {result.message}")
    return Outcome(PASS, case_name, worst)


def _run_backend_kernel(backend: Backend, kernel: object, case: ConformanceCase,
                        infos: list[TensorInfo | None]) -> list[np.ndarray]:
    values = [a if i in case.op.value_inputs else None for i, a in enumerate(case.inputs)]
    run = kernel.prepare(backend, case.node, infos, case.outputs, values)  # type: ignore[attr-defined]
    ins = [None if a is None else DeviceTensor.from_numpy(backend, a) for a in case.inputs]
    outs = [DeviceTensor.empty(backend, o.shape, o.dtype) for o in case.outputs]  # type: ignore[arg-type]
    try:
        run(ins, outs)
        return [t.numpy() for t in outs]
    finally:
        for t in [*outs, *ins]:
            if t is not None:
                t.close()


def _expect_error(backend: Backend, case: ConformanceCase) -> Outcome:
    """PASS when the reference and the backend both refuse the case's invalid inputs with
    ``case.raises`` (out-of-range indices: never clamped, never read as zeros)."""
    want = case.raises
    assert want is not None
    runs: list[tuple[str, Callable[[], object]]] = [
        ("the reference", lambda: case.op.reference(case.node, case.inputs))]
    if not case.op.host_only:
        runs.append((backend.name, lambda: run_node(backend, case.op, case.node, case.inputs)))
    for who, run in runs:
        try:
            with np.errstate(all="ignore"):
                run()
        except want:
            continue
        except Exception as exc:  # noqa: BLE001 - the wrong error fails the case
            return Outcome(FAIL, case.name, None, f"{who} raised {type(exc).__name__}: {exc}, "
                                                  f"expected {want.__name__}"[:500])
        return Outcome(FAIL, case.name, None, f"{who} computed outputs from invalid inputs; "
                                              f"expected {want.__name__}")
    return Outcome(PASS, case.name, 0.0, f"raised {want.__name__}")


def run_case(backend: Backend, case: ConformanceCase) -> list[Outcome]:
    """The portable lowering and every backend-specific kernel that supports the case."""
    name = case.name
    if case.infer_error:
        return [Outcome(FAIL, name, None, case.infer_error)]
    reason = exclusion(backend, case)
    if reason:
        return [Outcome(SKIP, name, None, reason)]
    if case.raises:
        return [_expect_error(backend, case)]
    if case.op.host_only:
        return [Outcome(HOST, name, None, "declared host_only: computed by its reference")]
    if _has_strings(case):
        return [Outcome(HOST, name, None, "string tensors are computed on the host")]
    try:
        with np.errstate(all="ignore"):
            expected = case.op.reference(case.node, case.inputs)
    except Exception as exc:  # noqa: BLE001 - a broken reference fails the case
        return [Outcome(FAIL, name, None, f"reference raised {type(exc).__name__}: {exc}")]
    if DType.int64 not in backend.capabilities.dtypes and _beyond_int32(expected):
        return [Outcome(SKIP, name, None, f"{backend.name} stores int64 as int32 "
                        "(capabilities); the outputs exceed int32")]
    outcomes = []
    try:
        with np.errstate(all="ignore"):
            got = run_node(backend, case.op, case.node, case.inputs)
        outcomes.append(judge(name, got, expected, case.rtol, case.atol, case.op.random))
    except HostOnly as exc:
        outcomes.append(Outcome(HOST, name, None, f"HostOnly: {exc}"))
    except UnsupportedOpError as exc:
        outcomes.append(Outcome(NOT_IMPLEMENTED, name, None, str(exc)))
    except Exception as exc:  # noqa: BLE001 - any other error fails this case, not the run
        outcomes.append(Outcome(FAIL, name, None, f"{type(exc).__name__}: {exc}"[:500]))
    infos = [None if a is None else TensorInfo(as_dtype(a.dtype), tuple(a.shape))
             for a in case.inputs]
    for kernel in backend_kernels(backend.name, case.op.domain, case.op.op_type):
        label = f"{name} [{type(kernel).__name__}]"
        try:
            # outside its declared domain placement never uses it: the portable lowering
            # (checked above) is what runs there
            if kernel.outside_domain(case.node, infos, case.outputs) is not None:
                continue
            if not kernel.supports(case.node, infos, case.outputs):
                continue
            with np.errstate(all="ignore"):
                got = _run_backend_kernel(backend, kernel, case, infos)
            outcomes.append(judge(label, got, expected, case.rtol, case.atol, case.op.random))
        except Exception as exc:  # noqa: BLE001 - reported as this kernel's failure
            outcomes.append(Outcome(FAIL, label, None, f"{type(exc).__name__}: {exc}"[:500]))
    return outcomes


def run_kernel_case(backend: Backend, case: KernelCase) -> Outcome:
    """One case of the kernel suite (``spawnml.testing.kernel_suite``), with its own tolerance."""
    reason = unsupported_reason(backend, case)
    if reason:
        return Outcome(SKIP, case.name, None, reason)
    try:
        with np.errstate(all="ignore"):
            got = case.run(backend)
    except Exception as exc:  # noqa: BLE001 - reported as this case's failure
        return Outcome(FAIL, case.name, None, f"{type(exc).__name__}: {exc}"[:500])
    result = compare(got, case.reference, Tolerance(case.rtol, case.atol))
    return Outcome(PASS if result.ok else FAIL, case.name, result.max_error, result.message)


# -- the verdict ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What one case means for one backend: ``pass``, ``fail``, ``xfail`` or ``skip``."""

    status: str  # PASS, FAIL, XFAIL or "skip"
    reason: str = ""


VERDICT_SKIP = "skip"
ReferenceOutcomes = Sequence[Outcome] | Callable[[], Sequence[Outcome] | None] | None


def reference_outcomes(case: ConformanceCase) -> list[Outcome] | None:
    """``case`` on the reference executor (cpu); None when cpu cannot be loaded."""
    from spawnml.errors import SpawnMLError
    from spawnml.registry import get_backend

    try:
        cpu = get_backend(REFERENCE_EXECUTOR)
    except SpawnMLError:
        return None
    return run_case(cpu, case)


def verdict(backend_name: str, case: ConformanceCase | None, outcomes: Sequence[Outcome],
            reference: ReferenceOutcomes = None) -> Verdict:
    """The one verdict on ``case`` for ``backend_name``, from its ``outcomes`` (the portable
    lowering and each backend kernel, :func:`run_case`), used by the CLI's matrix and exit
    status and by the pytest kit alike.

    The rule: a failing outcome fails the case, unless the case fails on the reference
    executor (cpu) too: then it is an op issue (its reference or its portable kernel), not
    this backend's, and the case is ``xfail`` on every backend other than cpu (on cpu itself
    it stays ``fail``). ``reference`` gives the case's outcomes on cpu: a sequence, or a
    callable called only when a failure needs them (:func:`reference_outcomes` runs the case
    on cpu, whether or not cpu is among the backends checked); None, or cpu unavailable,
    means a failure stays ``fail``. Without a failure: ``pass`` if any outcome passed, else
    ``skip`` (excluded by capabilities, not implemented, computed on the host)."""
    failures = [o for o in outcomes if o.status == FAIL]
    if failures:
        first = failures[0]
        why = f"{first.case}: {first.detail} (max error {first.max_error})"
        if case is None or backend_name == REFERENCE_EXECUTOR or reference is None:
            return Verdict(FAIL, why)
        found = reference() if callable(reference) else reference
        if found is not None and any(o.status == FAIL for o in found):
            return Verdict(XFAIL, f"fails on {REFERENCE_EXECUTOR} too (an op issue): {why}")
        return Verdict(FAIL, why)
    if any(o.status == PASS for o in outcomes):
        return Verdict(PASS)
    reasons = [f"{o.status}: {o.detail}" for o in outcomes] or ["no outcome"]
    return Verdict(VERDICT_SKIP, reasons[0])


def apply_verdict(found: Verdict, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """``outcomes`` as the matrix counts them: the failing ones become XFAIL when the case's
    verdict is xfail."""
    if found.status != XFAIL:
        return list(outcomes)
    why = f"fails on {REFERENCE_EXECUTOR} too (an op issue): "
    return [replace(o, status=XFAIL, detail=why + o.detail) if o.status == FAIL else o
            for o in outcomes]
