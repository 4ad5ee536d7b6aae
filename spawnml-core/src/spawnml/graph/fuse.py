"""Graph-level fusion: neighbouring portable kernels on one backend become one kernel.

Runs on a specialised, placed graph (``plan.specialise``), before memory planning. For each
node in order, an input produced by another portable node on the same backend, read by
nobody else and not a graph output, is fused away:

* **prologue** — when the producer's last launch is straight-line (elementwise, broadcast,
  transpose, pad, concat, the apply half of a normalisation...), the consumer reads the
  producer's expression instead of its buffer (``kernel.compose.inline``); the producer's
  earlier launches (e.g. a normalisation's statistics) join the fused step;
* **epilogue** — when the consumer is one straight-line launch that reads the value only at
  its own output index, it runs inside the producer's last launch on the value about to be
  stored (``kernel.compose.epilogue``): Conv/MatMul/Gemm/pool/reduction + residual Add, Clip,
  Sigmoid·x, GELU, scale/shift, Cast...

Repeated to a fixed point, chains collapse. A fusion is skipped when it would recompute
something expensive inside a loop, exceed the backend's kernel inputs, or fail to compile
(e.g. a device loop limit); the unfused kernels then run as before. The fused step is named
after its nodes (``Conv_3+Add_4+Relu_5``) in placement reports, profiles and
``SPAWNML_DUMP_KERNELS``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import Backend
from ..dtypes import DType, dtype as as_dtype
from ..errors import KernelError, SpawnMLError
from ..execute import PreparedLowering
from ..kernel import compose, ir
from ..kernel.ir import KernelIR, walk_expr
from ..op import Data, In, Launch, Lowering, Node, Out, Ref, TensorInfo, Tmp
from .ir import Graph
from .plan import NodePlan, Specialised

FUSED = "fused"  # the kind and location of a step absorbed into a later one
MAX_INPUTS = 7  # WebGPU's default maxStorageBuffersPerShaderStage (8) minus the output
MAX_GATHER_IN_LOOP = 32
"""A producer read inside a consumer's loop is recomputed on every iteration (a MatMul reads
each element of A once per column of B). Only pure gathers, one read and a little integer
index math (Transpose, Reshape-like copies, Slice), are inlined there; anything
costlier is cheaper materialised until tiled kernels stage it in workgroup memory."""
MAX_INLINED = 400
INDEX_CALLS = frozenset({"floordiv", "floormod", "truncdiv", "truncmod", "min", "max"})
MAX_KERNEL = 20_000
FUSABLE_DTYPES = frozenset({DType.float32, DType.int32, DType.bool})


def fusion_enabled() -> bool:
    """``SPAWNML_FUSE=0`` turns graph-level fusion off (for comparisons and debugging)."""
    return os.environ.get("SPAWNML_FUSE", "1") != "0"


class _Fixed:
    """A launch's kernel that is already specialised (``Launch.kernel`` stand-in)."""

    def __init__(self, ir: KernelIR) -> None:
        self.ir = ir
        self.name = ir.name

    def specialize(self, *args: Any, **consts: Any) -> KernelIR:
        return self.ir


@dataclass
class _Launch:
    kernel: KernelIR
    inputs: list[Ref]
    output: Out | Tmp


@dataclass
class _Unit:
    """A portable step as specialised launches over its node's inputs and temporaries."""

    launches: list[_Launch]
    temps: list[TensorInfo]


def _info(step: NodePlan, temps: Sequence[TensorInfo], ref: Ref) -> TensorInfo:
    if isinstance(ref, In):
        info = step.inputs[ref.index]
        assert info is not None
        return info
    if isinstance(ref, Out):
        return step.outputs[ref.index]
    if isinstance(ref, Tmp):
        return temps[ref.index]
    return TensorInfo(as_dtype(ref.array.dtype), tuple(ref.array.shape))


def _unit(step: NodePlan) -> _Unit:
    run = step.run
    if isinstance(run.lowering, _FusedLowering):
        return run.lowering.unit
    temps = list(run.lowering.temps)
    launches = []
    for launch in run.lowering.launches:
        *ins, out = launch.viewed([_info(step, temps, r)
                                   for r in [*launch.inputs, launch.output]])
        spec = launch.kernel.specialize(
            [(i.shape, i.dtype) for i in ins], (out.shape, out.dtype), **launch.consts
        )
        launches.append(_Launch(spec, list(launch.inputs), launch.output))
    return _Unit(launches, temps)


class _FusedLowering(Lowering):
    """A Lowering that remembers the specialised unit it was built from."""

    unit: _Unit


def _lowering(unit: _Unit) -> _FusedLowering:
    low = _FusedLowering(
        [Launch(_Fixed(la.kernel), list(la.inputs), la.output) for la in unit.launches],  # type: ignore[arg-type]
        list(unit.temps),
    )
    low.unit = unit
    return low


def _members(step: NodePlan) -> list[Node]:
    return list(step.fused) or [step.node]


class _Inputs:
    """The fused node's inputs: each distinct value once."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.infos: list[TensorInfo | None] = []
        self.values: list[np.ndarray | None] = []

    def ref(self, step: NodePlan, ref: Ref, tmp_base: int) -> Ref:
        if isinstance(ref, In):
            name = step.node.inputs[ref.index]
            if name not in self.names:
                self.names.append(name)
                self.infos.append(step.inputs[ref.index])
                self.values.append(step.values[ref.index])
            return In(self.names.index(name))
        if isinstance(ref, Tmp):
            return Tmp(ref.index + tmp_base)
        return ref


def _ref_key(ref: Ref) -> object:
    return ("data", id(ref.array)) if isinstance(ref, Data) else ref


def _merged(launch: _Launch) -> _Launch:
    """Inputs that are the same buffer read once; reads at the output index made direct."""
    keys = [_ref_key(r) for r in launch.inputs]
    same = [keys.index(k) for k in keys]
    kernel = compose.simplify_identity_reads(compose.merge_inputs(launch.kernel, same))
    return _Launch(kernel, [launch.inputs[i] for i in sorted(set(same))], launch.output)


class Fuser:
    """Fuses the portable steps of one specialised graph (see the module docstring)."""

    def __init__(
        self,
        spec: Specialised,
        graph: Graph,
        backends: dict[str, Backend],
        outputs: set[str],
        extra_reads: dict[int, list[str]],
    ) -> None:
        self.spec = spec
        self.steps = spec.steps
        self.backends = backends
        self.keep = set(outputs)  # values that must stay materialised
        for names in extra_reads.values():
            self.keep.update(names)
        for step in self.steps:
            for sub in step.node.subgraphs.values():
                self.keep.update(sub.outer_names())
        self.fusions = 0

    # -- bookkeeping -------------------------------------------------------------------
    def _readers(self, name: str) -> list[int]:
        return [i for i, s in enumerate(self.steps)
                if s.kind not in ("folded", "unused", FUSED) and name in s.node.inputs]  # fmt: skip

    def _producer(self, name: str) -> int | None:
        for i, s in enumerate(self.steps):
            if s.kind not in ("folded", "unused", FUSED) and name in s.node.outputs:
                return i
        return None

    def _single_use(self, name: str, reader: int) -> int | None:
        """The step producing ``name`` when ``reader`` is its only reader and it is neither
        kept (graph output, subgraph read) nor a constant."""
        if not name or name in self.keep or name in self.spec.consts:
            return None
        p = self._producer(name)
        return p if p is not None and self._readers(name) == [reader] else None

    def _fusable_value(self, name: str, consumer: int) -> tuple[int, int | None] | None:
        """``(producer, view)``: the step computing ``name`` when it may be fused into step
        ``consumer``. ``view`` is the step in between when ``name`` is a reshape-like view of
        the producer's output (a view has the producer's flat layout, so flat reads of the
        view read the producer's elements)."""
        p = self._single_use(name, consumer)
        if p is None:
            return None
        view, produced = None, name
        step = self.steps[p]
        if step.kind == "portable" and step.aliases and not step.run.steps:
            if [n for n in step.node.outputs if n] != [name] or 0 not in step.aliases:
                return None
            produced = step.node.inputs[step.aliases[0]]
            view, p = p, self._single_use(produced, p)
            if p is None:
                return None
        prod, cons = self.steps[p], self.steps[consumer]
        if prod.kind != "portable" or prod.location != cons.location or prod.aliases:
            return None
        if not (self._planned_inputs(prod) and self._planned_inputs(cons)):
            return None
        if [o for o in prod.node.outputs if o] != [produced] or prod.node.outputs[0] != produced:
            return None
        info = prod.outputs[0]
        backend = self.backends[prod.location]
        if info.dtype not in FUSABLE_DTYPES or (
            info.dtype is not DType.bool and backend.storage_dtype(info.dtype) is not info.dtype
        ):
            return None
        return p, view

    def _planned_inputs(self, step: NodePlan) -> bool:
        """Whether every input has the shape planned for it (none comes from a step whose
        shapes are known only at run time)."""
        for name in step.node.inputs:
            p = self._producer(name) if name else None
            if p is not None and self.steps[p].kind in ("dynamic", "control"):
                return False
        return True

    # -- the pass ----------------------------------------------------------------------
    def run(self) -> int:
        for c in range(len(self.steps)):
            while self.steps[c].kind == "portable" and not self.steps[c].aliases:
                if not self._fuse_into(c):
                    break
        return self.fusions

    def _fuse_into(self, c: int) -> bool:
        cons = self.steps[c]
        for name in dict.fromkeys(n for n in cons.node.inputs if n):
            found = self._fusable_value(name, c)
            if found is None:
                continue
            try:
                if self._try(*found, c, name):
                    return True
            except (KernelError, SpawnMLError):
                continue  # e.g. a device limit: this pair stays two kernels
        return False

    def _try(self, p: int, view: int | None, c: int, name: str) -> bool:
        prod, cons = self.steps[p], self.steps[c]
        if getattr(prod.run, "checks", None) or getattr(cons.run, "checks", None):
            return False  # a check reads its node's own inputs: those nodes stay apart
        pu, cu = _unit(prod), _unit(cons)
        if not _simple(pu, writes_out_last=True) or not _simple(cu, writes_out_last=False):
            return False
        positions = {k for k, n in enumerate(cons.node.inputs) if n == name}
        last = pu.launches[-1]
        value = compose.value_expr(last.kernel)
        if value is not None and self._inline_ok(value, cu, positions):
            return self._prologue(p, c, pu, cu, positions, view)
        if len(cu.launches) == 1 and not cu.temps and len(cons.node.outputs) == 1:
            return self._epilogue(p, c, pu, cu, positions, view)
        return False

    def _inline_ok(self, value: Any, cu: _Unit, positions: set[int]) -> bool:
        size = compose.size_of(value)
        in_loop = any(
            compose.loads_in_loops(la.kernel.body, b)
            for la in cu.launches
            for b, r in enumerate(la.inputs)
            if isinstance(r, In) and r.index in positions
        )
        if in_loop:
            reads = sum(1 for e in walk_expr(value) if isinstance(e, ir.Load))
            return reads == 1 and size <= MAX_GATHER_IN_LOOP and compose.calls(value) <= INDEX_CALLS
        return size <= MAX_INLINED

    def _prologue(
        self, p: int, c: int, pu: _Unit, cu: _Unit, positions: set[int], view: int | None
    ) -> bool:
        prod, cons = self.steps[p], self.steps[c]
        names = _Inputs()
        early = [
            _Launch(la.kernel, [names.ref(prod, r, 0) for r in la.inputs], la.output)
            for la in pu.launches[:-1]
        ]
        last = pu.launches[-1]
        base = len(pu.temps)
        launches = list(early)
        for la in cu.launches:
            kernel = la.kernel
            owners = [(cons, r, base) for r in la.inputs]
            for b in sorted(_reads(la, positions), reverse=True):
                kernel = compose.inline(kernel, b, last.kernel, self._name(prod, cons))
                owners = owners[:b] + owners[b + 1:] + [(prod, r, 0) for r in last.inputs]
            refs = [names.ref(*owner) for owner in owners]
            out = la.output if isinstance(la.output, Out) else Tmp(la.output.index + base)
            launches.append(_merged(_Launch(kernel, refs, out)))
        unit = _Unit(launches, [*pu.temps, *cu.temps])
        return self._replace(p, c, unit, names, cons.node.outputs, cons.outputs, view)

    def _epilogue(
        self, p: int, c: int, pu: _Unit, cu: _Unit, positions: set[int], view: int | None
    ) -> bool:
        prod, cons = self.steps[p], self.steps[c]
        la = _merged(cu.launches[0])
        reads = _reads(la, positions)
        if len(reads) != 1:
            return False
        b = reads[0]
        last = pu.launches[-1]
        value = compose.value_expr(la.kernel)
        if value is None or compose.size_of(value) > MAX_INLINED:
            return False
        if la.kernel.size != last.kernel.size:
            return False
        reads_of_value = [e for e in walk_expr(value) if isinstance(e, ir.Load) and e.buffer == b]
        if not all(compose.is_identity_index(e.index, la.kernel.size) for e in reads_of_value):
            return False
        names = _Inputs()
        launches = [
            _Launch(x.kernel, [names.ref(prod, r, 0) for r in x.inputs], x.output)
            for x in pu.launches[:-1]
        ]
        kernel = compose.epilogue(last.kernel, la.kernel, b, self._name(prod, cons))
        refs = [names.ref(prod, r, 0) for r in last.inputs]
        refs += [names.ref(cons, r, 0) for k, r in enumerate(la.inputs) if k != b]
        launches.append(_merged(_Launch(kernel, refs, Out(0))))
        unit = _Unit(launches, list(pu.temps))
        return self._replace(p, c, unit, names, cons.node.outputs, cons.outputs, view)

    def _name(self, prod: NodePlan, cons: NodePlan) -> str:
        nodes = [*_members(prod), *_members(cons)]
        return compose.fused_name([n.name or n.op_type for n in nodes if n.op_type])

    def _replace(
        self, p: int, c: int, unit: _Unit, names: _Inputs, outputs: list[str],
        out_infos: list[TensorInfo],
        view: int | None = None,
    ) -> bool:
        prod, cons = self.steps[p], self.steps[c]
        backend = self.backends[cons.location]
        limit = min(MAX_INPUTS, backend.capabilities.max_kernel_inputs)
        if any(len(la.inputs) > limit for la in unit.launches):
            return False
        if any(compose.body_size(la.kernel.body) > MAX_KERNEL for la in unit.launches):
            return False
        run = PreparedLowering(backend, _lowering(unit), names.infos, out_infos)
        between = [] if view is None else _members(self.steps[view])
        members = [*_members(prod), *between, *_members(cons)]
        node = Node(
            "+".join(n.op_type for n in members), list(names.names), list(outputs), {},
            "+".join(n.name or n.op_type for n in members), "spawnml.fused", cons.node.opset,
        )
        fused = NodePlan(
            node, cons.op, list(names.infos), list(out_infos), list(names.values),
            cons.location, "portable", run=run, used_inputs=set(range(len(names.names))),
            reason=_reasons(prod, cons), fused=members,
        )
        for old in (prod, cons):
            if hasattr(old.run, "close"):
                old.run.close()
        self.steps[p] = dataclasses.replace(prod, kind=FUSED, location=FUSED, run=None)
        if view is not None:
            self.steps[view] = dataclasses.replace(
                self.steps[view], kind=FUSED, location=FUSED, run=None
            )
        self.steps[c] = fused
        self.fusions += 1
        return True


def _reasons(*steps: NodePlan) -> str:
    """The placement reasons of fused steps, each once: a node's own reason (why its backend
    kernel gave way) must survive its fusion into a neighbour."""
    found: list[str] = []
    for step in steps:
        for reason in step.reason.split("; ") if step.reason else ():
            if reason not in found:
                found.append(reason)
    return "; ".join(found)


def _reads(launch: _Launch, positions: set[int]) -> list[int]:
    """The kernel inputs of ``launch`` that read one of the node inputs ``positions``."""
    return [b for b, r in enumerate(launch.inputs) if isinstance(r, In) and r.index in positions]


def _simple(unit: _Unit, writes_out_last: bool) -> bool:
    """Launches that never read an output; with ``writes_out_last``, only the last launch
    writes (output 0) and the others write temporaries. A unit without launches (its output
    aliases an input, or is empty) has nothing to fuse."""
    if not unit.launches:
        return False
    if any(isinstance(r, Out) for la in unit.launches for r in la.inputs):
        return False
    if writes_out_last:
        *early, last = unit.launches
        return last.output == Out(0) and all(isinstance(la.output, Tmp) for la in early)
    return True


def fuse(
    spec: Specialised,
    graph: Graph,
    backends: dict[str, Backend],
    outputs: set[str],
    extra_reads: dict[int, list[str]],
) -> int:
    """Fuse the portable steps of ``spec`` in place; returns the number of fusions."""
    if not fusion_enabled():
        return 0
    return Fuser(spec, graph, backends, outputs, extra_reads).run()
