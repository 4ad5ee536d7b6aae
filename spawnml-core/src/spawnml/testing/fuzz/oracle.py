"""Run one case on a spawnml backend and on onnxruntime (``onnx.reference`` as the third
opinion where they disagree), and classify the outcome.

Classes: ``ok``; ``both-rejected``; ``refused-valid`` (spawnml raised a ``SpawnMLError`` where
onnxruntime ran the model); ``accepts-invalid`` (spawnml ran a model onnxruntime refused,
informational); ``foreign`` (spawnml raised anything that is not a ``SpawnMLError``: the main
bug class, grouped by the innermost spawnml frame); ``mismatch`` (values differ beyond
tolerance where onnxruntime and ``onnx.reference`` agree against spawnml, grouped by the first
node whose output differs (``localize``); a rerun of the same session differs from the first
run; or spawnml changed its feeds); ``oracles-disagree`` (a difference the oracles do not
settle); ``reference-mismatch`` (onnxruntime has no kernel and spawnml differs from
``onnx.reference`` alone, informational); ``crash``/``hang``/``oracle-failure`` are set by
``workers`` when a process dies or times out.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .cases import Case

OK = "ok"
BOTH_REJECTED = "both-rejected"
REFUSED_VALID = "refused-valid"
ACCEPTS_INVALID = "accepts-invalid"
FOREIGN = "foreign"
MISMATCH = "mismatch"
ORACLES_DISAGREE = "oracles-disagree"
REFERENCE_MISMATCH = "reference-mismatch"
CRASH = "crash"
HANG = "hang"
ORACLE_FAILURE = "oracle-failure"
CLASSES = (OK, BOTH_REJECTED, REFUSED_VALID, ACCEPTS_INVALID, FOREIGN, MISMATCH,
           ORACLES_DISAGREE, REFERENCE_MISMATCH, CRASH, HANG, ORACLE_FAILURE)
FATAL = frozenset({CRASH, HANG, FOREIGN, MISMATCH})
"""The classes that make ``scripts/fuzz.py`` exit 1."""

TOLERANCES = {2: (1e-2, 1e-3), 4: (1e-3, 1e-4), 8: (1e-3, 1e-4)}
"""(rtol, atol) by float itemsize: float16, float32, float64."""

Feeds = dict[str, np.ndarray]
SpawnRunner = Callable[[bytes, Feeds, str], list[list[np.ndarray]]]
"""Runs model bytes on a backend and returns the outputs of each run of one session."""
Stage = Callable[[str], None]

_OWN = re.compile(r"[\\/](spawnml(?:_[a-z0-9_]+)?)[\\/]")


@dataclass
class Outcome:
    """The verdict on one case on one backend; ``key`` groups outcomes into bugs."""

    kind: str
    seed: int
    backend: str
    cls: str
    error_type: str = ""
    message: str = ""
    where: str = ""
    detail: str = ""
    label: str = ""
    stage: str = ""
    seconds: float = 0.0

    @property
    def fatal(self) -> bool:
        return self.cls in FATAL

    @property
    def key(self) -> tuple[str, str, str]:
        """(class, exception type or mismatch kind, spawnml file:line or op)."""
        return self.cls, self.error_type, self.where

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the three runners ----------------------------------------------------------------------
def run_spawnml(model: bytes, feeds: Feeds, backend: str, runs: int = 3) -> list[list[np.ndarray]]:
    """Outputs of ``runs`` runs of one session (the first plans, the second records the
    launch sequence, the third replays it). The caller's arrays are fed as they are, so a
    session that writes into its feeds is caught."""
    import spawnml

    session = spawnml.InferenceSession(model, backends=backend)
    try:
        return [[np.asarray(o) for o in session.run(None, feeds)] for _ in range(runs)]
    finally:
        session.close()


def run_onnxruntime(model: bytes, feeds: Feeds) -> list[np.ndarray]:
    """Outputs of onnxruntime's CPU provider, one thread, quiet."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, _copy(feeds))]


def run_reference(model: bytes, feeds: Feeds) -> list[np.ndarray]:
    """Outputs of ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, _copy(feeds))]


def _copy(feeds: Feeds) -> Feeds:
    return {k: np.array(v, copy=True) for k, v in feeds.items()}


# -- comparing --------------------------------------------------------------------------------
def compare(expected: np.ndarray, actual: np.ndarray, strict_dtype: bool = True) -> str | None:
    """None when ``actual`` matches ``expected`` (same shape and dtype, NaN and ±inf in the
    same places, finite values within TOLERANCES, integers exact), else what differs."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape:
        return f"shape {a.shape} != {e.shape}"
    if e.dtype != a.dtype and (strict_dtype or e.dtype.kind != a.dtype.kind):
        return f"dtype {a.dtype} != {e.dtype}"
    if e.dtype.kind != "f":
        bad = e != a
        if not bad.any():
            return None
        i = _index(np.argmax(bad), e.shape)
        return f"{int(bad.sum())} of {e.size} differ, at {i}: {a[i].item()!r} != {e[i].item()!r}"
    nan = np.isnan(e) != np.isnan(a)
    if nan.any():
        return f"NaN positions differ ({int(nan.sum())} of {e.size})"
    work = np.float64 if e.dtype.itemsize > 4 else np.float32  # no float64 copies of big outputs
    ew, aw = e.astype(work, copy=False), a.astype(work, copy=False)
    inf = np.isinf(ew) | np.isinf(aw)
    if (ew[inf] != aw[inf]).any():
        return f"±inf positions differ ({int((ew[inf] != aw[inf]).sum())} of {e.size})"
    rtol, atol = TOLERANCES.get(e.dtype.itemsize, TOLERANCES[4])
    with np.errstate(all="ignore"):
        finite = np.isfinite(ew)
        err = np.where(finite, np.abs(aw - ew), 0)
        bad = err > atol + rtol * np.abs(np.where(finite, ew, 0))
    if not bad.any():
        return None
    i = _index(np.argmax(np.where(bad, err, -1)), e.shape)
    return (f"{int(bad.sum())} of {e.size} differ, max abs err {float(err[i]):.3g} at {i}: "
            f"{a[i].item()!r} != {e[i].item()!r}")


def _index(flat: np.integer, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(k) for k in np.unravel_index(int(flat), shape)) if shape else ()


def compare_all(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                strict_dtype: bool = True) -> tuple[int, str] | None:
    """(output index, difference) of the first output that differs, or None."""
    if len(expected) != len(actual):
        return -1, f"{len(actual)} outputs != {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        diff = compare(e, a, strict_dtype)
        if diff is not None:
            return i, diff
    return None


def _identical(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype
        and np.array_equal(x, y, equal_nan=x.dtype.kind in "fc") for x, y in zip(a, b))


# -- exceptions -------------------------------------------------------------------------------
def innermost_frame(exc: BaseException, own_only: bool = True) -> str:
    """``package/path.py:line`` of the innermost traceback frame in a spawnml package (the
    fuzzer excluded), or of the innermost frame at all when ``own_only`` is false or no
    spawnml frame is on the stack."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames if own_only else []):
        match = _OWN.search(frame.filename)
        if match and "testing/fuzz/" not in frame.filename.replace("\\", "/"):
            return f"{frame.filename[match.start() + 1:]}:{frame.lineno}"
    return f"{_short(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else "")[:300]


def _is_spawnml_error(exc: BaseException) -> bool:
    from spawnml.errors import SpawnMLError

    return isinstance(exc, SpawnMLError)


def _lacks_kernel(exc: BaseException) -> bool:
    """onnxruntime has no CPU kernel for this op/dtype: a valid model it cannot run."""
    return type(exc).__name__ == "NotImplemented" or "NOT_IMPLEMENTED" in str(exc)


def _producer(model: bytes, index: int) -> str:
    """The op type producing graph output ``index`` (the mismatch's group), or "?"."""
    import onnx

    try:
        graph = onnx.ModelProto.FromString(model).graph
        name = graph.output[index].name
        return next((n.op_type for n in graph.node if name in n.output), "input")
    except Exception:  # noqa: BLE001 - a damaged model: no producer to name
        return "?"


# -- the verdict ------------------------------------------------------------------------------
def judge(case: Case, backend: str, runner: SpawnRunner = run_spawnml,
          stage: Stage | None = None) -> Outcome:
    """Run ``case`` on spawnml ``backend`` (through ``runner``) and on the oracles; classify."""
    say = stage or (lambda _name: None)
    start = time.perf_counter()
    out = Outcome(case.kind, case.seed, backend, OK, label=case.label)

    def done(cls: str, **fields: str) -> Outcome:
        out.cls = cls
        for k, v in fields.items():
            setattr(out, k, v)
        out.seconds = round(time.perf_counter() - start, 3)
        return out

    say("spawnml")
    before = _copy(case.feeds)
    spawn_exc: BaseException | None = None
    runs: list[list[np.ndarray]] = []
    try:
        with np.errstate(all="ignore"):
            runs = runner(case.model, case.feeds, backend)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        spawn_exc = exc
    if spawn_exc is not None and not _is_spawnml_error(spawn_exc):
        return done(FOREIGN, error_type=type(spawn_exc).__name__, message=_message(spawn_exc),
                    where=innermost_frame(spawn_exc),
                    detail=innermost_frame(spawn_exc, own_only=False))
    if spawn_exc is None and not _identical(list(before.values()), list(case.feeds.values())):
        return done(MISMATCH, error_type="feeds modified", where="session.run",
                    detail="spawnml wrote into the arrays it was fed")
    for i, later in enumerate(runs[1:], start=2):
        if not _identical(runs[0], later):
            diff = compare_all(runs[0], later)
            return done(MISMATCH, error_type="rerun differs", where=f"run {i}",
                        detail=f"run {i} vs run 1: {diff}")
    del runs[1:]  # big outputs: keep one run in memory

    say("onnxruntime")
    ort_exc: BaseException | None = None
    try:
        expected = run_onnxruntime(case.model, case.feeds)
    except Exception as exc:  # noqa: BLE001 - onnxruntime refusing the model
        ort_exc = exc
    if spawn_exc is not None:
        if ort_exc is not None:
            return done(BOTH_REJECTED, error_type=type(spawn_exc).__name__,
                        message=_message(spawn_exc))
        return done(REFUSED_VALID, error_type=type(spawn_exc).__name__,
                    message=_message(spawn_exc), where=innermost_frame(spawn_exc))
    got = runs[0] if runs else []
    if ort_exc is not None and not _lacks_kernel(ort_exc):
        return done(ACCEPTS_INVALID, error_type=type(ort_exc).__name__,
                    message=_message(ort_exc))
    if ort_exc is None:
        diff = compare_all(expected, got)
        if diff is None:
            return done(OK)

    say("reference")
    try:
        reference = run_reference(case.model, case.feeds)
    except Exception as exc:  # noqa: BLE001 - onnx.reference cannot run it either
        if ort_exc is not None:
            return done(ACCEPTS_INVALID, error_type=type(ort_exc).__name__,
                        message=_message(ort_exc), detail=f"onnx.reference: {_message(exc)}")
        index, text = diff  # type: ignore[misc]
        return done(ORACLES_DISAGREE, error_type="no reference", where=_producer(case.model, index),
                    detail=f"vs onnxruntime: {text}; onnx.reference: {_message(exc)}")
    ref_diff = compare_all(reference, got)
    if ort_exc is not None:  # onnxruntime lacks a kernel: onnx.reference alone decides
        if ref_diff is None:
            return done(OK, detail="onnx.reference only")
        index, text = ref_diff
        return done(REFERENCE_MISMATCH, error_type="values", where=_producer(case.model, index),
                    detail=f"vs onnx.reference: {text}")
    index, text = diff  # type: ignore[misc]
    oracles_agree = compare_all(expected, reference, strict_dtype=False) is None
    first = text.split(" ")[0]
    kind = first if first in ("shape", "dtype", "NaN", "±inf") else "values"
    if oracles_agree and ref_diff is not None:
        from .localize import first_divergent  # it imports this module

        say("localize")
        found = first_divergent(case.model, case.feeds, backend, runner)
        blame = f"first divergent node {found[1]} ({found[0]}): {found[2]}; " if found else ""
        return done(MISMATCH, error_type=kind,
                    where=found[0] if found else _producer(case.model, index),
                    detail=f"{blame}output {index} vs onnxruntime and onnx.reference: {text}")
    return done(ORACLES_DISAGREE, error_type=kind, where=_producer(case.model, index),
                detail=f"output {index} vs onnxruntime: {text}; vs onnx.reference: "
                       f"{'equal' if ref_diff is None else ref_diff[1]}")
