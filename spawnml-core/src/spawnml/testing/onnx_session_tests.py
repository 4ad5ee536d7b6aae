"""The official ONNX node test cases run through the ``onnx.backend`` adapter over
InferenceSession (the acceptance path; ``onnx_node_tests`` runs ops node by node).

Each case is a model plus data sets; a case passes when every output matches within the
case's own rtol/atol. Failures are classified: "fail" (wrong values or shapes),
"unsupported" (an op, opset, attribute or type spawnml does not implement: a
SpawnMLError saying so), "error" (anything else), "timeout".
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, UnsupportedOpError
from .onnx_node_tests import node_cases

CASE_TIMEOUT_S = 30


@dataclass
class CaseResult:
    name: str
    group: str  # the op the case tests
    status: str  # pass, fail, unsupported, error, timeout
    detail: str = ""
    seconds: float = 0.0
    fallback: int = 0  # nodes no backend kernel ran: computed by their numpy reference


class _Timeout(Exception):
    pass


def case_group(case: Any) -> str:
    """The op a case tests: the single node's op_type, else the model's op types."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    ops = sorted({n.op_type for n in nodes})
    name = case.name.removeprefix("test_")
    guess = next((o for o in ops if o.lower() == name.split("_")[0].replace("_", "")), None)
    return guess or f"multi-node ({', '.join(ops[:4])}{'…' if len(ops) > 4 else ''})"


def output_problem(got: Any, expected: Any, rtol: float, atol: float) -> str:
    """Why an output misses an ONNX test's expected value, as onnx's own runner judges it
    (sequences element by element, empty optionals, bfloat16 within 2 ulps); "" if it
    matches."""
    from ..onnx_backend import _array

    if expected is None or got is None:  # an empty optional
        return "" if got is expected else f"got {type(got).__name__}, expected {expected!r}"
    if isinstance(expected, list):  # a sequence: element by element
        if not isinstance(got, list) or len(got) != len(expected):
            return f"got {type(got).__name__} of {len(got) if isinstance(got, list) else '?'}" \
                   f", expected a sequence of {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = output_problem(g, e, rtol, atol)
            if problem:
                return f"element {i}: {problem}"
        return ""
    e = np.asarray(_array(expected))
    g = np.asarray(got)
    if e.dtype == object or g.dtype == object:
        return "" if np.array_equal(g, e) else "object outputs differ"
    if g.shape != e.shape:
        return f"shape {g.shape} != expected {e.shape}"
    if e.dtype.kind == "V" and "float" in e.dtype.name:  # ml_dtypes: bfloat16, float8...
        if g.dtype != e.dtype:
            return f"dtype {g.dtype} != expected {e.dtype}"
        # as onnx's own runner: compared as float32 (NaN equal), bfloat16 within 2 ulps
        rtol = max(rtol, 2**-6) if e.dtype.name == "bfloat16" else rtol
        g, e = g.astype(np.float32), e.astype(np.float32)
    if e.dtype.kind in "fc":
        try:
            np.testing.assert_allclose(g.astype(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as exc:
            return " ".join(str(exc).split())[:300]
        return ""
    if g.dtype != e.dtype and not (e.dtype.kind == g.dtype.kind == "b"):
        return f"dtype {g.dtype} != expected {e.dtype}"
    return "" if np.array_equal(g, e) else "values differ"


def run_case(backend: str, case: Any, timeout_s: int = CASE_TIMEOUT_S) -> CaseResult:
    from ..onnx_backend import SpawnMLBackend

    group = case_group(case)
    start = time.perf_counter()

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout_s)
    try:
        with np.errstate(all="ignore"):
            rep = SpawnMLBackend.prepare(case.model, backend=backend)
            for inputs, expected in case.data_sets:
                got = rep.run(list(inputs))
                if len(got) != len(expected):
                    return CaseResult(case.name, group, "fail",
                                      f"{len(got)} outputs, expected {len(expected)}")  # fmt: skip
                for i, (g, e) in enumerate(zip(got, expected)):
                    problem = output_problem(g, e, case.rtol, case.atol)
                    if problem:
                        return CaseResult(case.name, group, "fail", f"output {i}: {problem}")
        kinds = rep.session.placement().kinds.values()
        return CaseResult(case.name, group, "pass", fallback=sum(k == "reference" for k in kinds))
    except _Timeout:
        return CaseResult(case.name, group, "timeout", f"over {timeout_s} s")
    except (UnsupportedOpError, BackendUnavailableError) as exc:
        return CaseResult(case.name, group, "unsupported", _first_line(exc))
    except Exception as exc:  # noqa: BLE001 - every other failure is reported per case
        return CaseResult(case.name, group, "error", f"{type(exc).__name__}: {_first_line(exc)}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        elapsed = time.perf_counter() - start
        _ = elapsed


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[:2])
    return text[:300]


def run_all(backend: str, only: set[str] | None = None) -> Iterator[CaseResult]:
    """Every node case (or those whose group is in ``only``) on ``backend``."""
    for case in node_cases():
        if only is None or case_group(case) in only or case.name in only:
            start = time.perf_counter()
            result = run_case(backend, case)
            result.seconds = time.perf_counter() - start
            yield result
