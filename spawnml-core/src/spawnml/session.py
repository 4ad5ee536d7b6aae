"""InferenceSession: load an ONNX model once, run it many times (onnxruntime conventions).

Thread safety: ``run`` may be called from several threads. Feed validation and host work
run concurrently; building a plan for a new input-shape set is serialised per session, and
device work is serialised per backend (one lock per backend instance, shared by every
session), because a backend's buffer pool and queue are not thread-safe. For parallel
throughput on one device, batch inputs instead of adding threads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import Backend
from .errors import InvalidInputError, UnsupportedOpError
from .graph.feeds import validate_feeds
from .graph.importer import import_model
from .graph.passes import PassReport, optimise
from .graph.plan import HOST, NodePlan, lookup_op
from .graph.runtime import DEFAULT_MAX_PLANS, Plan, Runner
from .memory import host_memory_errors
from .op import TensorInfo
from .profile import Profile
from .registry import backend_names, get_available_backends, get_backend
from .tensor import DeviceTensor
from .values import ValueInfo, describe_type, info_of

log = logging.getLogger("spawnml.session")

_backend_locks: dict[int, threading.RLock] = {}
_locks_guard = threading.Lock()


def _backend_lock(backend: Backend) -> threading.RLock:
    with _locks_guard:
        return _backend_locks.setdefault(id(backend), threading.RLock())


@dataclass
class SessionOptions:
    """Session settings: ``optimize`` runs the fusing passes (Conv+BN, activations, and
    graph-level kernel fusion)."""

    optimize: bool = True
    log_fallback: bool = True
    record: bool = True
    """Record each input-shape set's launch sequence on its second run and replay it after
    (``graph.record``); ``SPAWNML_RECORD=0`` turns it off too."""
    max_cached_plans: int = DEFAULT_MAX_PLANS
    """Plans kept per input-shape set, least recently used first out: an evicted plan's
    device buffers, constants and recordings are released (rebuilt if its shapes return)."""
    max_tensor_bytes: int | None = None
    """The largest tensor a run may allocate, in bytes; a larger one raises
    OutOfMemoryError before anything allocates it. None: ``SPAWNML_MAX_TENSOR_BYTES``, else
    the host's available memory when the plan is built; 0: no limit."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_cached_plans, int) or self.max_cached_plans < 1:
            raise InvalidInputError(
                f"max_cached_plans must be a positive int, got {self.max_cached_plans!r}"
            )
        if self.max_tensor_bytes is not None and (
            not isinstance(self.max_tensor_bytes, int) or self.max_tensor_bytes < 0
        ):
            raise InvalidInputError(
                f"max_tensor_bytes must be a byte count >= 0 or None, got "
                f"{self.max_tensor_bytes!r}"
            )


@dataclass(frozen=True)
class NodeArg:
    """An input or output: ``name``, ``shape`` (ints, or strings for symbolic dims) and
    ``type`` such as ``"tensor(float)"``."""

    name: str
    shape: list[int | str | None] | None
    type: str


class Placement(dict):
    """Node name -> backend name (or "host"), with ``counts`` per backend and ``kinds``
    (node -> how it runs: kernel, portable, host, reference, control, folded) and ``fused``
    (node -> the name of the fused kernel that computes it with its neighbours)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.kinds: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.fused: dict[str, str] = {}  # node -> the fused kernel computing it
        for step in plan.spec.steps:
            if step.kind in ("folded", "unused", "fused"):
                continue
            for node in step.fused or [step.node]:
                self[node.name] = step.location
                self.kinds[node.name] = step.kind
                if step.fused:
                    self.fused[node.name] = step.node.name
                if step.reason:
                    self.reasons[node.name] = step.reason
        self.counts: Counter[str] = Counter(self.values())
        self.folded = sum(1 for s in plan.spec.steps if s.kind == "folded")
        self.unused = sum(1 for s in plan.spec.steps if s.kind == "unused")


def _host_reason(step: NodePlan) -> str:
    """Why a node runs on the host, short: its HostOnly message without the node's name."""
    reason = step.reason.removeprefix(f"{step.node.describe()}: ")
    if not reason or reason == f"{step.node.op_type} is host-only":
        return "declared host-only"
    return reason.removesuffix(", so the node runs on the host")


@dataclass
class MemoryReport:
    """Planned device memory for one input-shape set (weights excluded)."""

    planned_peak_bytes: int
    intermediate_bytes: int
    output_bytes: int
    slots: dict[str, list[int]] = field(default_factory=dict)


def _arg(name: str, info: ValueInfo | None) -> NodeArg:
    if not isinstance(info, TensorInfo):
        return NodeArg(name, None, describe_type(info))
    shape = None if info.shape is None else list(info.shape)
    return NodeArg(name, shape, info.dtype.onnx_type_name)


class InferenceSession:
    """Runs an ONNX model on the given backends, in preference order."""

    def __init__(
        self,
        path_or_bytes: str | os.PathLike | bytes | Any,
        backends: str | Sequence[str | Backend] | None = None,
        strict: bool = False,
        options: SessionOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(options, Mapping):
            options = SessionOptions(**options)
        self.options = options or SessionOptions()
        self.strict = strict
        names = backend_names(backends)
        names = names if names is not None else get_available_backends()
        if not names:
            raise InvalidInputError("no backends given")
        self.backends = [b if isinstance(b, Backend) else get_backend(b) for b in names]
        with host_memory_errors("loading the model"):
            self._load(path_or_bytes)

    def _load(self, path_or_bytes: str | os.PathLike | bytes | Any) -> None:
        """Import, check and optimise the model; plan it now when its inputs are static."""
        self.graph = import_model(path_or_bytes)
        self.model_nodes = len(self.graph.nodes)  # as loaded, before fusion and folding
        self._profile: Profile | None = None
        self._check_ops()
        self.passes: PassReport = optimise(self.graph, fuse=self.options.optimize)
        self._runner = Runner(
            self.graph, self.backends, fuse=self.options.optimize, record=self.options.record,
            max_plans=self.options.max_cached_plans,
            max_tensor_bytes=self.options.max_tensor_bytes,
        )  # fmt: skip
        self._logged = False
        static = {v.name: v.info for v in self.graph.inputs}
        if all(i is not None and i.is_static for i in static.values()):
            self._ensure(self._runner.plan(static))  # type: ignore[arg-type]

    def _check_ops(self) -> None:
        missing = []
        for node in self.graph.walk():
            try:
                lookup_op(node)
            except UnsupportedOpError as exc:
                missing.append(f"{node.describe()}: {exc}")
        if missing:
            raise UnsupportedOpError(
                f"{len(missing)} node(s) use operators spawnml does not implement:\n  "
                + "\n  ".join(missing[:50])
            )

    # -- description ---------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return [_arg(v.name, v.info) for v in self.graph.inputs]

    def get_outputs(self) -> list[NodeArg]:
        return [
            _arg(v.name, v.info or self.graph.value_info.get(v.name)) for v in self.graph.outputs
        ]

    def get_providers(self) -> list[str]:
        return [b.name for b in self.backends]

    def _latest(self) -> Plan:
        plan = self._runner.last_plan
        if plan is None:
            concrete = {}
            for v in self.graph.inputs:
                assert v.info is not None and v.info.shape is not None
                shape = tuple(d if isinstance(d, int) else 1 for d in v.info.shape)
                concrete[v.name] = TensorInfo(v.info.dtype, shape)
            plan = self._runner.plan(concrete)
            self._ensure(plan)
        return plan

    def placement(self) -> Placement:
        """Where each node runs for the latest input shapes (symbolic dims as 1 before any run)."""
        return Placement(self._latest())

    def memory(self) -> MemoryReport:
        """The memory plan for the latest input shapes."""
        m = self._latest().memory
        return MemoryReport(m.peak_bytes, m.intermediate_bytes, m.output_bytes, m.slots)

    # -- checks on each new plan -----------------------------------------------------------
    def _ensure(self, plan: Plan) -> None:
        if plan.checked:
            return
        plan.checked = True
        first = self.backends[0].name
        off = [s for s in plan.spec.steps if s.kind in ("kernel", "portable", "reference")
               and s.location != first]  # fmt: skip
        if self.strict and off:
            lines = [f"{s.node.describe()} -> {s.location}: {s.reason or 'no kernel'}" for s in off]
            raise UnsupportedOpError(
                f"strict=True: backend {first!r} cannot run {len(off)} node(s):\n  "
                + "\n  ".join(lines)
            )
        host = [s for s in plan.spec.steps if s.kind == "host"]
        if (off or host) and not self._logged and self.options.log_fallback:
            self._logged = True
            moved = Counter(f"{s.node.op_type} -> {s.location}" for s in off)
            parts = [f"{k} x{v}" if v > 1 else k for k, v in sorted(moved.items())]
            ops = Counter(s.node.op_type for s in host)
            why: dict[str, dict[str, None]] = {}  # op type -> its reasons, in order
            for s in host:
                why.setdefault(s.node.op_type, {})[_host_reason(s)] = None
            if ops:
                parts.append("host-only: " + ", ".join(
                    f"{k} x{v} ({'; '.join(why[k])})" for k, v in sorted(ops.items())))
            log.warning(
                "placement: %d of %d nodes do not run on %s (%s)",
                len(off) + len(host),
                sum(len(s.fused) or 1 for s in plan.spec.steps
                    if s.kind not in ("folded", "unused", "fused")),
                first,
                "; ".join(parts),
            )

    # -- running ---------------------------------------------------------------------------
    def run(
        self,
        output_names: str | Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
        *,
        device: bool = False,
        profile: bool = False,
    ) -> list[Any]:
        """Outputs in the order of ``output_names`` as numpy arrays, or as DeviceTensors
        with ``device=True`` (host-computed outputs are uploaded to the first backend).

        ``output_names``: a list of output names (None or an empty list: every output, in
        the model's order); a single name as a str is taken as ``[name]`` (onnxruntime
        requires a list). A name may appear more than once: each occurrence gets its own
        result (an independent array, or a DeviceTensor handle closed independently).
        Unknown names raise InvalidInputError listing the model's outputs. Every returned
        DeviceTensor stays valid until it is closed, whatever else is closed (the feeds,
        other outputs, the session). Feeds may be DeviceTensors on a backend of this
        session. ``profile=True`` times this run per kernel into ``profile()``."""
        if profile and self._profile is None:
            self._profile = Profile(self.model_nodes)
        return self._run(output_names, input_feed, device, self._profile if profile else None)

    def profile(
        self,
        input_feed: Mapping[str, Any] | None = None,
        runs: int = 1,
        output_names: str | Sequence[str] | None = None,
        *,
        reset: bool = False,
    ) -> Profile:
        """With ``input_feed``: a new profile of ``runs`` runs of it. Without: the profile
        collected by ``run(..., profile=True)`` so far (``reset`` starts a new one)."""
        if input_feed is not None:
            result = Profile(self.model_nodes)
            for _ in range(runs):
                self._run(output_names, input_feed, False, result)
            return result
        found = self._profile or Profile(self.model_nodes)
        if reset:
            self._profile = None
        return found

    def _output_names(self, output_names: str | Sequence[str] | None) -> list[str]:
        """The requested names as a list (see ``run``), checked against the outputs."""
        all_outputs = [v.name for v in self.graph.outputs]
        if isinstance(output_names, str):
            output_names = [output_names]
        if not output_names:  # None or empty, as onnxruntime
            return all_outputs
        names = list(output_names)
        wrong = [n for n in names if not isinstance(n, str)]
        if wrong:
            raise InvalidInputError(
                f"output names must be strings, got {wrong!r}; outputs are {all_outputs}"
            )
        unknown = [n for n in names if n not in all_outputs]
        if unknown:
            raise InvalidInputError(f"unknown output name(s) {unknown}; outputs are {all_outputs}")
        return names

    def _run(
        self,
        output_names: str | Sequence[str] | None,
        input_feed: Mapping[str, Any],
        device: bool,
        profile: Profile | None,
    ) -> list[Any]:
        names = self._output_names(output_names)
        feeds = validate_feeds(self.graph.inputs, input_feed)
        for name, value in feeds.items():
            if isinstance(value, DeviceTensor) and value.backend not in self.backends:
                raise InvalidInputError(
                    f"input {name!r} is a DeviceTensor on {value.backend.name!r}, which is not "
                    f"one of this session's backends {self.get_providers()}"
                )
        with ExitStack() as stack:
            stack.enter_context(host_memory_errors("running the model"))
            for backend in sorted(self.backends, key=lambda b: b.name):
                stack.enter_context(_backend_lock(backend))
            infos = {n: info_of(t) for n, t in feeds.items()}
            plan = self._runner.plan(infos)
            self._ensure(plan)
            start = time.perf_counter()
            results = self._runner.run(feeds, names, keep=device, profile=profile)
            out = self._deliver(names, results, plan, device)
            if profile is not None:
                profile.runs += 1
                profile.run_s += time.perf_counter() - start
            return out

    def _deliver(
        self, names: list[str], results: dict[str, Any], plan: Plan, device: bool
    ) -> list[Any]:
        """One result per requested name, in order; a repeated name gets its own copy
        (host) or handle (device). On failure every DeviceTensor made here is closed."""
        out: list[Any] = []
        seen: set[str] = set()
        try:
            for name in names:
                value, again = results[name], name in seen
                seen.add(name)
                if not device:
                    out.append(np.array(value) if again or name in plan.spec.consts else value)
                elif not isinstance(value, DeviceTensor):
                    out.append(DeviceTensor.from_numpy(self.backends[0], np.asarray(value)))
                else:
                    out.append(value.share() if again else value)
        except BaseException:
            if device:
                for value in {id(v): v for v in [*results.values(), *out]}.values():
                    if isinstance(value, DeviceTensor):
                        value.close()
            raise
        return out

    def close(self) -> None:
        """Free the session's device memory (weights, plans)."""
        self._runner.close()

    def __enter__(self) -> InferenceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["InferenceSession", "SessionOptions", "NodeArg", "Placement", "MemoryReport", "HOST"]
