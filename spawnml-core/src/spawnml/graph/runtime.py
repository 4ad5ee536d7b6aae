"""Execute a graph: plans cached per input-shape set, kernels launched in order,
intermediates kept on their device, transfers only where placement changes backend.

A value lives at one location (a backend name, or "host" for numpy arrays); a consumer on
another location gets a copy made once per run. Steps whose input shapes were unknown when
planning (after data-dependent ops) are specialised on the fly, cached by their shapes.

Plans are kept in a bounded LRU cache (``max_plans``): the least recently used plan is closed
(device constants, recordings, prepared lowerings) when a new input-shape set needs room.
Results are owning DeviceTensor handles (``DeviceTensor.share``), so a result stays valid
whatever else is closed: the run's own buffers, a feed it aliases, another result.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend import Backend
from ..dtypes import DType
from ..errors import InvalidModelError
from ..execute import PreparedLowering
from ..memory import tensor_byte_limit
from ..op import TensorInfo
from ..tensor import DeviceTensor
from ..values import describe_type, info_of, is_tensor, on_host
from .fuse import fuse
from .ir import Graph
from .plan import (
    HOST,
    NodePlan,
    Specialised,
    check_tensor_sizes,
    host_reference,
    infer_node,
    place_node,
    specialise,
)
from .planner import MemoryPlan, plan_memory
from .record import NotRecordable, Recording, fused_nodes

if TYPE_CHECKING:
    from ..profile import KernelRow, Profile

Tensor = np.ndarray | DeviceTensor
log = logging.getLogger("spawnml.runtime")
RECORD_ENV = "SPAWNML_RECORD"
DEFAULT_MAX_PLANS = 16


def recording_enabled() -> bool:
    """False when ``SPAWNML_RECORD`` is 0/off/false: every run takes the normal path."""
    return os.environ.get(RECORD_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


@dataclass
class Plan:
    """A graph specialised for one input-shape set, placed, memory-planned, with its
    device constants uploaded."""

    spec: Specialised
    memory: MemoryPlan
    extra_reads: dict[int, list[str]]
    device_consts: dict[tuple[str, str], DeviceTensor] = field(default_factory=dict)
    dynamic: dict[tuple, NodePlan] = field(default_factory=dict)
    runs: int = 0  # runs that took the normal path
    recordings: dict[tuple, Recording | None] = field(default_factory=dict)
    """Per feed-location set (host, or the backend of a DeviceTensor feed): the recorded
    launch sequence, or None where the plan cannot be recorded."""
    not_recorded: str = ""  # why not, when a recording was refused
    checked: bool = False  # the session's placement checks have run on it
    users: int = 0  # runs in progress (an evicted plan is closed by the last one)
    evicted: bool = False

    def close(self) -> None:
        """Free what the plan holds on devices: recordings, uploaded constants, prepared
        lowerings (their data) of planned and run-time-specialised steps. Idempotent."""
        for rec in self.recordings.values():
            if rec is not None:
                rec.close()
        self.recordings.clear()
        for t in self.device_consts.values():
            t.close()
        self.device_consts.clear()
        for step in [*self.spec.steps, *self.dynamic.values()]:
            if hasattr(step.run, "close"):
                step.run.close()
        self.dynamic.clear()


def _where(t: Tensor) -> str:
    return t.backend.name if isinstance(t, DeviceTensor) else HOST


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


class Runner:
    """Runs one graph (a model's main graph or an If/Loop body) on ordered backends.

    ``max_plans`` bounds the plans cached per input-shape set (least recently used first
    out); ``max_tensor_bytes`` is the per-tensor limit (``memory.tensor_byte_limit``: None
    for the default, 0 for none) above which planning raises OutOfMemoryError."""

    def __init__(
        self,
        graph: Graph,
        backends: Sequence[Backend],
        weights: dict[tuple[str, str], DeviceTensor] | None = None,
        fuse: bool = True,
        record: bool = True,
        max_plans: int = DEFAULT_MAX_PLANS,
        max_tensor_bytes: int | None = None,
    ) -> None:
        self.graph = graph
        self.record = record
        self.fuse = fuse
        self.max_plans = max(1, int(max_plans))
        self.max_tensor_bytes = max_tensor_bytes
        self.backends = list(backends)
        self.by_name = {b.name: b for b in self.backends}
        self.weights = weights if weights is not None else {}
        self.plans: OrderedDict[tuple, Plan] = OrderedDict()
        self._lock = threading.RLock()
        self._subrunners: dict[tuple[int, str], Runner] = {}
        self.outputs = {v.name for v in graph.outputs}
        self.last_plan: Plan | None = None

    # -- planning ------------------------------------------------------------------------
    def plan(self, feeds: dict[str, TensorInfo], outer_consts: dict | None = None) -> Plan:
        """The cached plan for these feed infos and outer-scope constants (built and
        weights uploaded on first use; the least recently used plan is closed beyond
        ``max_plans``)."""
        key = tuple(sorted(feeds.items(), key=lambda item: item[0]))
        if outer_consts:
            key += tuple(sorted((n, _const_key(a)) for n, a in outer_consts.items()))
        with self._lock:
            plan = self.plans.get(key)
            if plan is None:
                plan = self._build(feeds, outer_consts)
                self.plans[key] = plan
                self._evict()
            else:
                self.plans.move_to_end(key)
            self.last_plan = plan
            return plan

    def tensor_limit(self) -> int | None:
        """The per-tensor byte limit now (the host's available memory by default)."""
        return tensor_byte_limit(self.max_tensor_bytes)

    def _build(self, feeds: dict[str, TensorInfo], outer_consts: dict | None) -> Plan:
        spec = specialise(self.graph, feeds, self.backends, outer_consts, self.tensor_limit())
        extra = {
            i: sorted({n for g in s.node.subgraphs.values() for n in g.outer_names()})
            for i, s in enumerate(spec.steps)
            if s.node.subgraphs
        }
        if self.fuse:
            fuse(spec, self.graph, self.by_name, self.outputs, extra)
        memory = plan_memory(spec, self.by_name, self.outputs, extra)
        plan = Plan(spec, memory, extra)
        try:
            self._upload_consts(plan)
        except BaseException:
            plan.close()
            raise
        return plan

    def _evict(self) -> None:
        """Close the least recently used plans beyond ``max_plans`` (a plan a run is using
        is closed when that run ends)."""
        while len(self.plans) > self.max_plans:
            _, old = self.plans.popitem(last=False)
            old.evicted = True
            if not old.users:
                old.close()

    def _upload_consts(self, plan: Plan) -> None:
        """Upload, one tensor at a time, each constant a device step reads."""
        for step in plan.spec.steps:
            if step.location not in self.by_name:
                continue
            backend = self.by_name[step.location]
            for i in sorted(step.used_inputs):
                name = step.node.inputs[i]
                if not name or name not in plan.spec.consts:
                    continue
                key = (backend.name, name)
                store = self.weights if name in self.graph.initializers else plan.device_consts
                if key not in store:
                    store[key] = DeviceTensor.from_numpy(backend, plan.spec.consts[name])

    # -- execution -----------------------------------------------------------------------
    def run(
        self,
        feeds: dict[str, Tensor],
        want: Sequence[str],
        *,
        keep: bool = False,
        profile: Profile | None = None,
        consts: dict[str, np.ndarray] | None = None,
    ) -> dict[str, Tensor]:
        """Run with validated feeds (arrays or DeviceTensors); returns each wanted name once.
        ``keep``: device values come back as owning DeviceTensors the caller closes (each
        valid on its own: closing a feed or another result never closes it); otherwise as
        host arrays (downloaded once per name). ``profile`` collects per-kernel timings.
        ``consts``: values a body reads from the enclosing plan's constants (folded and
        planned with, like initializers)."""
        names = list(dict.fromkeys(want))
        infos = {n: info_of(t) for n, t in feeds.items()}
        with self._lock:  # taken and marked in use at once: never closed under this run
            plan = self.plan(infos, consts)
            plan.users += 1
        try:
            rec = self.recording(plan, feeds)
            if rec is not None:
                if profile is not None:
                    profile.replayed_runs += 1
                results = rec.replay(feeds, names, keep=keep, profile=profile)
            else:
                plan.runs += 1
                results = _Execution(self, plan, feeds, profile).run(names)
        finally:
            self._leave(plan)
        return results if keep else _to_host(results)

    def _leave(self, plan: Plan) -> None:
        """A run of ``plan`` ended: close it if it was evicted meanwhile."""
        with self._lock:
            plan.users -= 1
            if plan.evicted and not plan.users:
                plan.close()

    def recording(self, plan: Plan, feeds: dict[str, Tensor]) -> Recording | None:
        """The plan's recording for these feeds' locations, built on the plan's second run
        (the first takes the normal path); None when recording is off or impossible."""
        if not self.record or not plan.runs or not recording_enabled():
            return None
        where = tuple(sorted((n, _where(t)) for n, t in feeds.items()))
        if where in plan.recordings:
            return plan.recordings[where]
        with self._lock:
            if where not in plan.recordings:
                try:
                    plan.recordings[where] = Recording(self, plan, dict(where))
                except NotRecordable as exc:
                    plan.recordings[where] = None
                    plan.not_recorded = str(exc)
                except Exception as exc:  # noqa: BLE001 - a failed recording keeps the normal path
                    plan.recordings[where] = None
                    plan.not_recorded = f"{type(exc).__name__}: {exc}"
                    log.warning("recording this plan failed; it runs the normal path: %s",
                                plan.not_recorded)  # fmt: skip
            return plan.recordings[where]

    def subrunner(self, node_id: int, attr: str, graph: Graph) -> Runner:
        with self._lock:
            key = (node_id, attr)
            if key not in self._subrunners:
                self._subrunners[key] = Runner(
                    graph, self.backends, {}, self.fuse, self.record, self.max_plans,
                    self.max_tensor_bytes,
                )
            return self._subrunners[key]

    def close(self) -> None:
        for plan in self.plans.values():
            plan.close()
        self.plans.clear()
        for sub in self._subrunners.values():
            sub.close()
        for t in self.weights.values():
            t.close()
        self.weights.clear()


def _const_key(array: np.ndarray) -> tuple:
    """How a plan's cache key names an outer constant: small ones by value; large ones by
    identity (the plan built with it holds it in its constants, so while the plan is
    cached no other array can take its id)."""
    if array.nbytes <= 4096:
        return (array.dtype.str, array.shape, array.tobytes())
    return (array.dtype.str, array.shape, id(array))


def _to_host(results: dict[str, Tensor]) -> dict[str, Any]:
    """Download each DeviceTensor result once and close its handle (all are closed, even
    when a download fails)."""
    out: dict[str, Any] = {}
    try:
        for name, value in results.items():
            out[name] = value.numpy() if isinstance(value, DeviceTensor) else value
    finally:
        for value in results.values():
            if isinstance(value, DeviceTensor):
                value.close()
    return out


class _Execution:
    """The state of one run: values by name at their home location, copies, slots."""

    def __init__(
        self, runner: Runner, plan: Plan, feeds: dict[str, Tensor], profile: Profile | None = None
    ) -> None:
        self.runner = runner
        self.plan = plan
        self.profile = profile
        self.values: dict[str, Tensor] = dict(feeds)
        self.copies: dict[tuple[str, str], Tensor] = {}
        self.owned: set[str] = set()  # values this run allocated (freed after last use)
        self.slots: dict[tuple[str, int], DeviceTensor] = {}
        self.viewed: list[DeviceTensor] = []  # dead tensors still viewed by live values
        self.checked: list[PreparedLowering] = []  # ran with checks: verified before results

    def tensor(self, name: str, where: str) -> Tensor:
        """Value ``name`` at location ``where`` (copied there once per run if needed)."""
        plan = self.plan
        if name not in self.values and name in plan.spec.consts:
            if where != HOST:
                key = (where, name)
                found = self.runner.weights.get(key) or plan.device_consts.get(key)
                if found is None:
                    found = plan.device_consts[key] = DeviceTensor.from_numpy(
                        self.runner.by_name[where], plan.spec.consts[name]
                    )
                return found
            return plan.spec.consts[name]
        value = self.values[name]
        if value is None or isinstance(value, list):  # an empty optional, a sequence
            if where != HOST:
                raise InvalidModelError(f"{name!r} is a {describe_type(info_of(value))} value; "
                                        f"only the host holds those, not {where!r}")  # fmt: skip
            return on_host(value)
        if _where(value) == where:
            return value
        key = (name, where)
        if key not in self.copies:
            host = value.numpy() if isinstance(value, DeviceTensor) else value
            self.copies[key] = (
                host if where == HOST else DeviceTensor.from_numpy(self.runner.by_name[where], host)
            )
        return self.copies[key]

    def _as_is(self, name: str) -> Tensor:
        """Value ``name`` wherever it is (a constant on the host)."""
        return self.values[name] if name in self.values else self.plan.spec.consts[name]

    def _output_tensor(self, step: NodePlan, j: int, name: str, planned: bool) -> DeviceTensor:
        backend = self.runner.by_name[step.location]
        info = step.outputs[j]
        shape = tuple(int(d) for d in info.shape)  # type: ignore[union-attr, arg-type]
        slot = self.plan.memory.assignment.get(name) if planned else None
        if slot is None:
            self.owned.add(name)
            return DeviceTensor.empty(backend, shape, info.dtype)
        owner = self.slots.get(slot)
        if owner is None:
            nbytes = self.plan.memory.slots[slot[0]][slot[1]]
            # Raw bytes as float32 words: every backend stores float32 as itself (uint8 would
            # be widened to 4 bytes per element where it is not native, e.g. on WebGPU).
            words = -(-nbytes // 4)
            owner = self.slots[slot] = DeviceTensor.empty(backend, (words,), DType.float32)
        return DeviceTensor(backend, owner.buffer, shape, info.dtype, _owner=owner)

    def _dynamic(self, step: NodePlan, inputs: list[Tensor | None]) -> NodePlan:
        """Specialise one node for the shapes (and host values) it actually got."""
        node, op = step.node, step.op
        infos = [info_of(t) if name else None for name, t in zip(node.inputs, inputs)]
        values = [
            t if isinstance(t, np.ndarray) and i in op.value_inputs else step.values[i]
            for i, t in enumerate(inputs)
        ]
        shapes = tuple(infos)
        known = tuple(v.tobytes() if isinstance(v, np.ndarray) else None for v in values)
        key = (id(node), shapes, known)
        with self.runner._lock:
            found = self.plan.dynamic.get(key)
            if found is None:
                outs = infer_node(op, node, infos, values)
                check_tensor_sizes(node, outs, self.runner.tensor_limit())
                found = NodePlan(node, op, infos, list(outs), values, HOST, "host")
                if all(o.is_static for o in outs):
                    place_node(found, self.runner.backends)
                self.plan.dynamic[key] = found
        return found

    def run(self, want: Sequence[str]) -> dict[str, Tensor]:
        """Run every step; returns each wanted value (DeviceTensors as owning handles)."""
        from .control import run_control

        steps = self.plan.spec.steps
        last_use = self.plan.memory.last_use
        results: dict[str, Tensor] = {}
        try:
            for index, step in enumerate(steps):
                if step.kind in ("folded", "unused", "fused"):
                    continue
                if step.kind == "control":  # bodies are specialised when they run
                    planned = True
                elif step.kind == "dynamic" or not self._matches(step):
                    step = self._dynamic(step, self._probe(step))
                    planned = False
                else:
                    planned = True
                if self.profile is None:
                    self._run_step(step, planned, index, run_control)
                else:
                    self._profiled_step(step, planned, index, run_control)
                self._release(index, last_use)
            for prepared in self.checked:
                prepared.verify()
            for name in want:
                value = self._result(name)
                results[name] = value.share() if isinstance(value, DeviceTensor) else value
            return dict(results)
        except BaseException:
            for value in results.values():
                if isinstance(value, DeviceTensor):
                    value.close()
            raise
        finally:
            self._finish()

    def _matches(self, step: NodePlan) -> bool:
        """Whether the inputs have the shapes the step was planned for."""
        for name, info in zip(step.node.inputs, step.inputs):
            if name and name in self.values and isinstance(info, TensorInfo):
                value = self.values[name]
                if not is_tensor(value) or _shape(value) != tuple(info.shape or ()):
                    return False
        return True

    def _probe(self, step: NodePlan) -> list[Tensor | None]:
        """The inputs as they are, with value inputs brought to the host."""
        out: list[Tensor | None] = []
        for i, name in enumerate(step.node.inputs):
            if not name:
                out.append(None)
            elif i in step.op.value_inputs or name not in self.values:
                out.append(self.tensor(name, HOST))
            else:
                out.append(self.values[name])
        return out

    def _run_step(self, step: NodePlan, planned: bool, index: int, run_control: Any) -> None:
        node = step.node
        where = step.location
        if step.kind == "control":  # values reach the bodies where they live
            values = [self._as_is(n) if n else None for n in node.inputs]
            reads = self.plan.extra_reads.get(index, [])
            outer = {n: self.values[n] for n in reads if n in self.values}
            consts = {n: self.plan.spec.consts[n] for n in reads
                      if n not in self.values and n in self.plan.spec.consts}  # fmt: skip
            results = run_control(self.runner, node, values, outer, consts)
            self._store(node.outputs, results)
            return
        if where == HOST:
            arrays = [self.tensor(n, HOST) if n else None for n in node.inputs]
            results = host_reference(step.op, node, arrays)
            for j, r in enumerate(results):
                info = step.outputs[j] if j < len(step.outputs) else None
                if isinstance(info, TensorInfo) and r is not None:
                    results[j] = np.asarray(r).astype(info.dtype.numpy, copy=False)
            self._store(node.outputs, results)
            return
        ins: list[Any] = [
            self.tensor(n, where)
            if n and (i in step.used_inputs or step.kind == "kernel")
            else None
            for i, n in enumerate(node.inputs)
        ]
        outs: list[DeviceTensor] = []
        for j, name in enumerate(node.outputs[: len(step.outputs)]):
            if j in step.aliases:
                src = ins[step.aliases[j]]
                outs.append(src.reshape(step.outputs[j].shape))  # type: ignore[union-attr, arg-type]
            else:
                outs.append(self._output_tensor(step, j, name or f"#{index}.{j}", planned))
        step.run.run(ins, outs) if hasattr(step.run, "run") else step.run(ins, outs)
        if getattr(step.run, "checks", None):
            self.checked.append(step.run)
        self._store(node.outputs, outs)

    def _profiled_step(self, step: NodePlan, planned: bool, index: int, run_control: Any) -> None:
        """Run one step timed (normal path: one row per step, its launches counted)."""
        assert self.profile is not None
        backend = self.runner.by_name.get(step.location)
        clock = time.perf_counter
        if backend is not None:
            backend.synchronize()
        t0 = clock()
        self._run_step(step, planned, index, run_control)
        t1 = clock()
        run = step.run
        launches = run.n_launches if isinstance(run, PreparedLowering) else 1
        if backend is None:
            call, device, launches = t1 - t0, 0.0, 0
        else:
            backend.synchronize()
            t2 = clock()
            method = "synchronous" if backend.device_timing == "synchronous" else "synchronize"
            self.profile.timing[backend.name] = method
            call, device = (0.0, t1 - t0) if method == "synchronous" else (t1 - t0, t2 - t1)
        prepared = run if isinstance(run, PreparedLowering) else None
        if prepared is not None:
            nbytes = sum(s.nbytes for s in prepared.steps if s.size)
        else:  # a backend kernel: what it reads and writes
            infos = [i for i in [*step.inputs, *step.outputs] if i is not None and i.is_static]
            nbytes = sum(i.size * i.dtype.itemsize for i in infos) if backend else 0
        self.profile.add(("step", index, id(step)), lambda: _step_row(step), call, device,
                         nbytes, launches)  # fmt: skip

    def _store(self, names: Sequence[str], results: Sequence[Tensor]) -> None:
        for name, r in zip(names, results):
            if name:
                self.values[name] = r
                if isinstance(r, DeviceTensor) and r._owner is None:
                    self.owned.add(name)

    def _release(self, index: int, last_use: dict[str, int]) -> None:
        """Free device values (and copies) whose last reader has run; a tensor another
        live value views stays alive until the end of the run."""
        dead = [n for n in list(self.values) if last_use.get(n, index) <= index
                and n not in self.runner.outputs]  # fmt: skip
        for name in dead:
            value = self.values.pop(name)
            if name in self.owned and isinstance(value, DeviceTensor):
                self._drop(value)
            self.owned.discard(name)
            for key in [k for k in self.copies if k[0] == name]:
                copy = self.copies.pop(key)
                if isinstance(copy, DeviceTensor):
                    self._drop(copy)

    def _drop(self, tensor: DeviceTensor) -> None:
        if any(isinstance(v, DeviceTensor) and v._owner is tensor for v in self.values.values()):
            self.viewed.append(tensor)
        else:
            tensor.close()

    def _result(self, name: str) -> Tensor:
        if name in self.values:
            return self.values[name]
        if name in self.plan.spec.consts:
            return self.plan.spec.consts[name]
        raise InvalidModelError(f"output {name!r} was not computed")

    def _finish(self) -> None:
        """Close what this run allocated: copies, its own values, slots (the results hold
        their own references to the buffers they live in)."""
        mine = [c for c in self.copies.values() if isinstance(c, DeviceTensor)] + self.viewed
        mine += [
            v for n, v in self.values.items() if n in self.owned and isinstance(v, DeviceTensor)
        ]
        for tensor in mine:
            tensor.close()
        self.copies.clear()
        for owner in self.slots.values():
            owner.close()


def _step_row(step: NodePlan) -> KernelRow:
    from ..profile import KernelRow

    nodes = fused_nodes(step)
    run = step.run
    if isinstance(run, PreparedLowering):
        kernel = "+".join(s.name for s in run.steps if s.size)
        kind = "launch" if kernel else "view"  # reshape-like: no launch
    else:
        kernel, kind = step.node.op_type, "kernel" if step.location != HOST else step.kind
    return KernelRow([n.name for n in nodes], [n.op_type for n in nodes], step.location,
                     kernel, kind)  # fmt: skip
