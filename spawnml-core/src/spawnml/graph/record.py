"""Recorded plans: a plan's launch sequence with every buffer resolved, replayed with no
per-node host work beyond the launch itself.

A recording is built for one plan (one input-shape set) and one set of feed locations
(host arrays, or DeviceTensors on a given backend). Building walks the plan's steps once:
each value gets a home (a persistent device buffer, "root", or a host cell), every launch
is bound once (``Backend.bind``: arguments, bind groups, uniforms prepared by the backend),
and consecutive launches of one backend are joined (``Backend.sequence``). A replay writes
the feeds into the recorded input buffers and calls the prepared callables in order.

What is recorded: device steps (portable lowerings and backend kernels), host steps with
static shapes (numpy references, as host callables) and transfers between locations
(download/upload into persistent buffers). Plans with control flow (If/Loop/Scan) or
steps whose shapes are known only at run time are not recorded (``NotRecordable``): they
run the normal path every time.

Buffers: intermediates keep the memory plan's slots, held by the recording for its life;
temporaries of multi-launch lowerings share one arena per backend. Results are owning
handles (``DeviceTensor.share``) on the buffers they live in: read at once and closed by the
caller or, when the caller keeps DeviceTensors, handed over: the recording then takes another
buffer for the next replay and rebinds only the launches that touch it. DeviceTensor feeds
are bound as the input buffer itself (rebinding its readers when a run passes another
buffer).

Loops that feed a run's kept outputs back as the next run's inputs (a KV cache) alternate
between two buffer sets: a handed-over root takes back the buffer it handed over the time
before when the caller has freed it (``BufferPool.acquire``'s ``prefer``), and the bindings
of the last few buffer sets are kept (keyed by the buffers' handles), so such a loop
rebinds nothing after its first two steps.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend import Backend, Buffer
from ..dtypes import DType, dtype as as_dtype
from ..errors import InvalidModelError
from ..execute import PreparedLowering
from ..op import TensorInfo
from ..tensor import DeviceTensor
from .plan import HOST, NodePlan, host_reference

if TYPE_CHECKING:
    from ..profile import KernelRow, Profile
    from .runtime import Plan, Runner


class NotRecordable(Exception):
    """The plan has a step a recording cannot hold (control flow, run-time shapes)."""


@dataclass
class _Root:
    """A device buffer the recording binds: owned (allocated once, renewed when handed
    over) or external (a DeviceTensor feed, set per run)."""

    backend: Backend
    nbytes: int
    tensor: DeviceTensor | None = None
    external: bool = False
    stale: bool = False  # handed over to a caller: renew before the next replay
    previous: Any = None  # the handle of the buffer handed over before this one

    def renew(self) -> None:
        """After a hand-over: let go of the buffer and take another, the one handed over
        before when its caller has freed it (a loop feeding outputs back then alternates
        between two buffers, whose bindings are kept)."""
        assert self.tensor is not None
        handed = self.tensor.buffer.handle
        self.tensor.close()
        buffer = self.backend.alloc(-(-self.nbytes // 4) * 4, prefer=self.previous)
        self.tensor = DeviceTensor(self.backend, buffer, (-(-self.nbytes // 4),), DType.float32)
        self.previous, self.stale = handed, False

    def release(self) -> None:
        """Let go of the buffer (external ones stay with their owners)."""
        if not self.external and self.tensor is not None:
            self.tensor.close()
        self.tensor = self.previous = None

    @property
    def buffer(self) -> Buffer:
        assert self.tensor is not None
        return self.tensor.buffer


@dataclass(frozen=True)
class _Val:
    """Where a value lives during a replay: a root (device), a fixed device constant, or a
    host cell."""

    where: str
    shape: tuple[int, ...]
    dtype: DType
    root: int = -1
    fixed: DeviceTensor | None = None
    cell: int = -1


@dataclass
class _Launch:
    """One recorded launch: a compiled program with buffer references (root indices or
    fixed buffers), or a backend kernel's run over DeviceTensor views."""

    backend: Backend
    key: tuple[int, int]  # (step index, launch index in the step)
    step: NodePlan
    program: Any = None  # PreparedLowering step (has .program) for compiled launches
    out: int | Buffer | None = None
    ins: list[int | Buffer] = field(default_factory=list)
    kernel: Any = None  # a backend kernel's run(inputs, outputs)
    kernel_ins: list[_Val | None] = field(default_factory=list)
    kernel_outs: list[_Val] = field(default_factory=list)
    bound: Callable[[], Any] | None = None
    roots: frozenset[int] = frozenset()
    nbytes: int = 0


@dataclass
class _Host:
    """A host action: upload, download, transfer or a host-computed step."""

    call: Callable[[], None]
    key: tuple[int, int]
    kind: str
    label: str
    nodes: list[str]
    op_types: list[str]
    backend: str
    nbytes: int = 0


@dataclass
class _Binding:
    """Every launch's bound callable and every group's call for one set of buffers of the
    roots that change between runs (``handles`` keeps those buffers' handles alive, so that
    their ids stay unique while the binding is kept)."""

    handles: tuple[Any, ...]
    bound: list[Callable[[], Any] | None]
    calls: list[Callable[[], Any] | None]


_MAX_BINDINGS = 4  # buffer sets whose bindings a recording keeps (least recently used out)


@dataclass
class _Group:
    """Consecutive launches on one backend, run as one ``Backend.sequence`` callable."""

    backend: Backend
    launches: list[_Launch]
    call: Callable[[], None] | None = None


def _nbytes(backend: Backend, shape: Sequence[int], dt: DType) -> int:
    size = 1
    for d in shape:
        size *= int(d)
    return size * backend.storage_dtype(dt).itemsize


def _static(shape: Any) -> tuple[int, ...]:
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise NotRecordable("a value's shape is not static")
    return tuple(int(d) for d in shape)


def fused_nodes(step: NodePlan) -> list[Any]:
    """The graph nodes a step computes (every member of a fused kernel)."""
    members = getattr(step, "fused", None) or getattr(step, "nodes", None)
    return list(members) if members else [step.node]


class Recording:
    """A plan's resolved launch sequence for one set of feed locations."""

    def __init__(self, runner: Runner, plan: Plan, feed_where: dict[str, str]) -> None:
        self.runner = runner
        self.plan = plan
        self.roots: list[_Root] = []
        self.cells: list[Any] = []
        self.vals: dict[tuple[str, str], _Val] = {}
        self.home: dict[str, str] = {}
        self.feed_cells: dict[str, int] = {}
        self.feed_roots: dict[str, int] = {}
        self.items: list[_Launch | _Host] = []
        self.checked: list[PreparedLowering] = []  # lowerings with checks: verify each replay
        self.groups: list[_Group | _Host] = []
        self._calls: list[Callable[[], Any]] = []
        self._slot_roots: dict[tuple[str, int], int] = {}
        self._arena: dict[str, list[int]] = {}  # backend -> free temp roots
        self._dynamic: set[int] = set()  # roots whose buffer may change between runs
        self._bindings: OrderedDict[tuple[int, ...], _Binding] = OrderedDict()
        self._reusable = True  # every launch's binding may be kept and restored
        self._launches: list[_Launch] = []  # the launches among ``items`` (set by _compile)
        try:
            self._build(feed_where)
            if not self.feed_roots:
                self._compile()  # bind now (DeviceTensor feeds bind at the first replay)
        except BaseException:
            self.close()
            raise

    # -- building ------------------------------------------------------------------------
    def _new_root(self, backend: Backend, nbytes: int, external: bool = False) -> int:
        root = _Root(backend, nbytes, external=external)
        if not external:
            root.tensor = DeviceTensor.empty(backend, (-(-max(nbytes, 4) // 4),), DType.float32)
        self.roots.append(root)
        return len(self.roots) - 1

    def _new_cell(self, value: Any = None) -> int:
        self.cells.append(value)
        return len(self.cells) - 1

    def _build(self, feed_where: dict[str, str]) -> None:
        by_name = self.runner.by_name
        infos = self.plan.spec.infos
        for name, where in feed_where.items():
            info = infos.get(name)
            if not isinstance(info, TensorInfo):
                raise NotRecordable(f"input {name!r} is not a tensor")
            shape = _static(info.shape)
            if where == HOST:
                val = _Val(HOST, shape, info.dtype, cell=self._new_cell())
                self.feed_cells[name] = val.cell
            else:
                backend = by_name[where]
                root = self._new_root(backend, _nbytes(backend, shape, info.dtype), external=True)
                val = _Val(where, shape, info.dtype, root=root)
                self.feed_roots[name] = root
                self._dynamic.add(root)
            self.vals[(name, where)] = val
            self.home[name] = where
        for index, step in enumerate(self.plan.spec.steps):
            if step.kind in ("folded", "unused", "fused"):
                continue
            if step.kind in ("dynamic", "control") or (step.run is None and step.location != HOST):
                raise NotRecordable(f"{step.node.describe()} runs as {step.kind}")
            if step.location == HOST:
                self._host_step(index, step)
            else:
                self._device_step(index, step)

    def _val(self, name: str, where: str, key: tuple[int, int]) -> _Val:
        """Value ``name`` at ``where``: a constant, its home, or a recorded transfer."""
        found = self.vals.get((name, where))
        if found is not None:
            return found
        plan = self.plan
        if name not in self.home and name in plan.spec.consts:
            array = plan.spec.consts[name]
            shape, dt = tuple(array.shape), as_dtype(array.dtype)
            if where == HOST:
                val = _Val(HOST, shape, dt, cell=self._new_cell(array))
            else:
                dkey = (where, name)
                tensor = self.runner.weights.get(dkey) or plan.device_consts.get(dkey)
                if tensor is None:
                    tensor = plan.device_consts[dkey] = DeviceTensor.from_numpy(
                        self.runner.by_name[where], array
                    )
                val = _Val(where, shape, dt, fixed=tensor)
            self.vals[(name, where)] = val
            return val
        if name not in self.home:
            raise InvalidModelError(f"value {name!r} is read before it is computed")
        src = self.vals[(name, self.home[name])]
        val = self._transfer(name, src, where, key)
        self.vals[(name, where)] = val
        return val

    def _transfer(self, name: str, src: _Val, where: str, key: tuple[int, int]) -> _Val:
        read = self._reader(src)
        if where == HOST:
            cell = self._new_cell()
            cells = self.cells

            def download() -> None:
                cells[cell] = read()

            self._add_host(download, key, "download", f"{name} -> host", src.where)
            return _Val(HOST, src.shape, src.dtype, cell=cell)
        backend = self.runner.by_name[where]
        root = self._new_root(backend, _nbytes(backend, src.shape, src.dtype))
        roots = self.roots
        upload = backend.upload

        def copy() -> None:
            upload(read(), roots[root].buffer)

        kind = "upload" if src.where == HOST else "transfer"
        self._add_host(copy, key, kind, f"{name} -> {where}", where)
        return _Val(where, src.shape, src.dtype, root=root)

    def _reader(self, val: _Val) -> Callable[[], np.ndarray]:
        """A callable returning the value as a host array (downloading device values)."""
        if val.where == HOST:
            cells, cell = self.cells, val.cell
            return lambda: cells[cell]
        if val.fixed is not None:
            tensor = val.fixed
            return tensor.numpy
        root = self.roots[val.root]
        shape, dt = val.shape, val.dtype
        return lambda: root.backend.download(root.buffer, shape, dt)

    def _add_host(self, call: Callable[[], None], key: tuple[int, int], kind: str, label: str,
                  backend: str, step: NodePlan | None = None) -> None:  # fmt: skip
        nodes = fused_nodes(step) if step is not None else []
        self.items.append(_Host(call, key, kind, label, [n.name for n in nodes],
                                [n.op_type for n in nodes], backend))  # fmt: skip

    def _host_step(self, index: int, step: NodePlan) -> None:
        node = step.node
        readers = [self._reader(self._val(n, HOST, (index, -1))) if n else None
                   for n in node.inputs]  # fmt: skip
        outs: list[int] = []
        casts: list[Any] = []
        for j, name in enumerate(node.outputs):
            info = step.outputs[j] if j < len(step.outputs) else None
            if not name:
                outs.append(-1)
                casts.append(None)
                continue
            if info is None:
                raise NotRecordable(f"{node.describe()}: output {name!r} has no info")
            val = _Val(HOST, _static(info.shape), info.dtype, cell=self._new_cell())
            self.vals[(name, HOST)] = val
            self.home[name] = HOST
            outs.append(val.cell)
            casts.append(info.dtype.numpy)
        cells, op = self.cells, step.op

        def compute() -> None:
            results = host_reference(op, node, [r() if r else None for r in readers])
            for j, r in enumerate(results):
                if j < len(outs) and outs[j] >= 0:
                    cells[outs[j]] = np.asarray(r).astype(casts[j], copy=False)

        self._add_host(compute, (index, 0), step.kind, node.op_type, HOST, step)

    def _output(self, step: NodePlan, j: int, name: str) -> _Val:
        backend = self.runner.by_name[step.location]
        info = step.outputs[j]
        shape = _static(info.shape)
        slot = self.plan.memory.assignment.get(name)
        if slot is None:
            root = self._new_root(backend, _nbytes(backend, shape, info.dtype))
        else:
            root = self._slot_roots.get(slot, -1)
            if root < 0:
                nbytes = self.plan.memory.slots[slot[0]][slot[1]]
                root = self._slot_roots[slot] = self._new_root(backend, nbytes)
        return _Val(step.location, shape, info.dtype, root=root)

    def _device_step(self, index: int, step: NodePlan) -> None:
        node, where = step.node, step.location
        backend = self.runner.by_name[where]
        key = (index, -1)
        ins: list[_Val | None] = [
            self._val(n, where, key) if n and (i in step.used_inputs or step.kind == "kernel")
            else None
            for i, n in enumerate(node.inputs)
        ]  # fmt: skip
        for info, val in zip(step.inputs, ins):
            if val is not None and info is not None and tuple(info.shape or ()) != val.shape:
                raise NotRecordable(f"{node.describe()}: an input's shape differs from its plan")
        outs: list[_Val] = []
        for j, name in enumerate(node.outputs[: len(step.outputs)]):
            if j in step.aliases:
                src = ins[step.aliases[j]]
                assert src is not None
                shape = _static(step.outputs[j].shape)
                outs.append(_Val(where, shape, step.outputs[j].dtype, src.root, src.fixed))
            else:
                outs.append(self._output(step, j, name or f"#{index}.{j}"))
        for name, val in zip(node.outputs, outs):
            if name:
                self.vals[(name, where)] = val
                self.home[name] = where
        run = step.run
        if isinstance(run, PreparedLowering):
            if run.checks:
                self.checked.append(run)
            temps = [self._temp(backend, _nbytes(backend, _static(t.shape), t.dtype))
                     for t in run.temps]  # fmt: skip
            refs = run.launch_refs([self._ref(v) for v in ins], [self._ref(v) for v in outs],
                                   temps)  # fmt: skip
            for n, (prepared, out, in_refs) in enumerate(refs):
                self.items.append(_Launch(backend, (index, n), step, prepared, out, in_refs,
                                          nbytes=prepared.nbytes))  # fmt: skip
            self._arena.setdefault(where, []).extend(temps)
        else:
            nbytes = sum(_nbytes(backend, v.shape, v.dtype) for v in [*ins, *outs] if v)
            self.items.append(_Launch(backend, (index, 0), step, kernel=run, kernel_ins=ins,
                                      kernel_outs=outs, nbytes=nbytes))  # fmt: skip

    def _ref(self, val: _Val | None) -> Any:
        if val is None:
            return None
        return val.fixed.buffer if val.fixed is not None else val.root

    def _temp(self, backend: Backend, nbytes: int) -> int:
        """A temporary root, reused from this backend's arena (temporaries live within one
        step and launches of a backend run in order)."""
        free = self._arena.setdefault(backend.name, [])
        fits = [r for r in free if self.roots[r].nbytes >= nbytes]
        if fits:
            root = min(fits, key=lambda r: self.roots[r].nbytes)
            free.remove(root)
            return root
        return self._new_root(backend, nbytes)

    # -- binding -------------------------------------------------------------------------
    def _buffer(self, ref: int | Buffer) -> Buffer:
        return ref if isinstance(ref, Buffer) else self.roots[ref].buffer

    def _view(self, val: _Val | None) -> DeviceTensor | None:
        if val is None:
            return None
        if val.fixed is not None:
            return val.fixed.reshape(val.shape)
        owner = self.roots[val.root].tensor
        assert owner is not None
        owner = owner._owner or owner
        return DeviceTensor(owner.backend, owner.buffer, val.shape, val.dtype, _owner=owner)

    def _bind(self, launch: _Launch) -> None:
        if launch.kernel is None:
            launch.roots = frozenset(r for r in [launch.out, *launch.ins] if isinstance(r, int))
            launch.bound = launch.backend.bind(
                launch.program.program,
                self._buffer(launch.out),  # type: ignore[arg-type]
                [self._buffer(r) for r in launch.ins],
            )
            return
        vals = [v for v in [*launch.kernel_ins, *launch.kernel_outs] if v is not None]
        launch.roots = frozenset(v.root for v in vals if v.root >= 0)
        ins = [self._view(v) for v in launch.kernel_ins]
        outs = [self._view(v) for v in launch.kernel_outs]
        run = launch.kernel
        binder = getattr(run, "bind", None)
        if binder is not None:
            launch.bound = binder(ins, outs)
            return
        call = run.run if hasattr(run, "run") else run

        def bound() -> None:
            call(ins, outs)

        launch.bound = bound

    def _compile(self) -> None:
        """Bind every launch and join consecutive launches of one backend."""
        self.groups = []
        for item in self.items:
            if isinstance(item, _Host):
                self.groups.append(item)
                continue
            self._bind(item)
            last = self.groups[-1] if self.groups else None
            if isinstance(last, _Group) and last.backend is item.backend:
                last.launches.append(item)
            else:
                self.groups.append(_Group(item.backend, [item]))
        for group in self.groups:
            if isinstance(group, _Group):
                group.call = group.backend.sequence([x.bound for x in group.launches])  # type: ignore[misc]
        self._calls = [g.call for g in self.groups]  # type: ignore[misc]
        # A backend kernel bound without ``bind`` reads DeviceTensor views at each call:
        # those of an older buffer set may be closed, so such bindings are never restored.
        self._launches = [x for x in self.items if isinstance(x, _Launch)]
        self._reusable = all(x.kernel is None or hasattr(x.kernel, "bind")
                             for x in self._launches)  # fmt: skip
        self._remember()

    def _binding_key(self) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
        """The ids and handles of the changing roots' buffers now (None: not kept)."""
        if not self._reusable:
            return None
        handles = tuple(self.roots[r].buffer.handle for r in sorted(self._dynamic))
        return tuple(id(h) for h in handles), handles

    def _remember(self) -> None:
        """Keep the current bindings for the current buffers of the changing roots."""
        found = self._binding_key()
        if found is None:
            return
        key, handles = found
        self._bindings[key] = _Binding(handles, [x.bound for x in self._launches],
                                       [g.call for g in self.groups])  # fmt: skip
        self._bindings.move_to_end(key)
        while len(self._bindings) > _MAX_BINDINGS:
            self._bindings.popitem(last=False)

    def _switch(self, changed: set[int]) -> None:
        """Bindings for the buffers now in ``changed`` roots: restored when this buffer set
        was bound before, else the touched launches are bound again (and remembered)."""
        found = self._binding_key()
        kept = self._bindings.get(found[0]) if found is not None else None
        if kept is None:
            self._rebind(changed)
            self._remember()
            return
        self._bindings.move_to_end(found[0])  # type: ignore[index]
        if kept.calls == self._calls:
            return  # bound to these buffers already
        for launch, bound in zip(self._launches, kept.bound, strict=True):
            launch.bound = bound
        for group, call in zip(self.groups, kept.calls, strict=True):
            if isinstance(group, _Group):
                group.call = call
        self._calls = [g.call for g in self.groups]  # type: ignore[misc]

    def _rebind(self, roots: set[int]) -> None:
        """Bind again the launches that touch ``roots`` (their buffers changed)."""
        for group in self.groups:
            if isinstance(group, _Group) and any(x.roots & roots for x in group.launches):
                for launch in group.launches:
                    if launch.roots & roots:
                        self._bind(launch)
                group.call = group.backend.sequence([x.bound for x in group.launches])  # type: ignore[misc]
        self._calls = [g.call for g in self.groups]  # type: ignore[misc]

    # -- replay --------------------------------------------------------------------------
    @property
    def n_launches(self) -> int:
        return sum(1 for item in self.items if isinstance(item, _Launch))

    def _prepare(self, feeds: dict[str, Any]) -> None:
        changed: set[int] = set()
        for i, root in enumerate(self.roots):
            if root.stale:  # its buffer was handed over: the spare or a fresh one
                root.renew()
                changed.add(i)
                if i not in self._dynamic:
                    self._dynamic.add(i)
                    self._bindings.clear()  # keyed by fewer roots: never matched again
        for name, r in self.feed_roots.items():
            tensor = feeds[name]
            root = self.roots[r]
            # The last run's feed may be closed by now (its owner is the caller): compare
            # buffers only while it is open, else bind again.
            last = root.tensor
            if last is None or last.closed or last.buffer is not tensor.buffer:
                changed.add(r)
            root.tensor = tensor
        if not self.groups and self.items:
            self._compile()  # the first replay binds (DeviceTensor feeds are known now)
        elif changed:
            self._switch(changed)
        cells = self.cells
        for name, c in self.feed_cells.items():
            cells[c] = feeds[name]

    def replay(
        self, feeds: dict[str, Any], want: Sequence[str], keep: bool = False,
        profile: Profile | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Run the recording with these feeds; returns the wanted values (views of the
        output buffers, or handed-over DeviceTensors with ``keep``)."""
        self._prepare(feeds)
        if profile is None:
            for call in self._calls:
                call()
        else:
            self._profiled(profile)
        for prepared in self.checked:
            prepared.verify()
        return self._results(want, keep)

    def _results(self, want: Sequence[str], keep: bool) -> dict[str, Any]:
        """Each wanted value: a host cell, or an owning handle on the buffer it lives in.
        With ``keep`` the recording hands those buffers over (renewed before the next
        replay); without, the caller reads the handles at once and closes them."""
        out: dict[str, Any] = {}
        handed: set[int] = set()
        try:
            for name in want:
                out[name] = self._result(name, handed if keep else None)
        except BaseException:
            for value in out.values():
                if isinstance(value, DeviceTensor):
                    value.close()
            raise
        for r in handed:
            self.roots[r].stale = True
        return out

    def _result(self, name: str, handed: set[int] | None) -> Any:
        where = self.home.get(name)
        if where is None:
            if name in self.plan.spec.consts:
                return self.plan.spec.consts[name]
            raise InvalidModelError(f"output {name!r} was not computed")
        val = self.vals[(name, where)]
        if val.where == HOST:
            return self.cells[val.cell]
        if val.fixed is not None:
            return val.fixed.share(val.shape, val.dtype)
        root = self.roots[val.root]
        assert root.tensor is not None
        if handed is not None and not root.external:
            handed.add(val.root)
        return root.tensor.share(val.shape, val.dtype)

    def _profiled(self, profile: Profile) -> None:
        from ..profile import MEASURED, KernelRow

        clock = time.perf_counter
        for group in self.groups:
            if isinstance(group, _Host):
                t0 = clock()
                group.call()
                t1 = clock()

                def make(h: _Host = group) -> KernelRow:
                    return KernelRow(h.nodes or [h.label], h.op_types or [h.kind], h.backend,
                                     "", h.kind)  # fmt: skip

                profile.add(("rec", group.key, group.kind, group.label), make, t1 - t0, 0.0,
                            group.nbytes, 0)  # fmt: skip
                continue
            backend = group.backend
            method = backend.device_timing
            profile.timing[backend.name] = method
            backend.synchronize()
            for launch in group.launches:
                assert launch.bound is not None
                measured = getattr(launch.bound, "profiled", None)
                t0 = clock()
                device = measured() if measured is not None else None
                if device is not None:
                    t1 = clock()
                    call = max(t1 - t0 - device, 0.0)
                elif measured is not None:  # not measured after all: launch + synchronize
                    call, device = 0.0, clock() - t0
                    profile.timing[backend.name] = "synchronize"
                else:
                    launch.bound()
                    t1 = clock()
                    backend.synchronize()
                    t2 = clock()
                    if method == "synchronous":
                        call, device = 0.0, t1 - t0
                    else:
                        call, device = t1 - t0, t2 - t1
                    if method in MEASURED:
                        profile.timing[backend.name] = "synchronize"
                profile.add(("rec", launch.key), lambda x=launch: _launch_row(x), call, device,
                            launch.nbytes, 1)  # fmt: skip

    def close(self) -> None:
        """Release the buffers this recording holds (external feeds stay with their owners;
        handed-over ones with the callers' handles)."""
        for root in self.roots:
            root.release()
        self.roots.clear()
        self._bindings.clear()
        self._calls = []
        self.groups = []
        self.items = []
        self._launches = []


def _launch_row(launch: _Launch) -> KernelRow:
    from ..profile import KernelRow

    nodes = fused_nodes(launch.step)
    kernel = getattr(launch.program, "name", "") if launch.program is not None else ""
    kind = "launch" if launch.kernel is None else "kernel"
    return KernelRow([n.name for n in nodes], [n.op_type for n in nodes], launch.backend.name,
                     kernel or launch.step.node.op_type, kind)  # fmt: skip
