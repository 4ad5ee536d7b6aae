"""Liveness-based memory planning: intermediates whose lifetimes do not overlap share a
buffer ("slot") on their backend, so the planned peak is far below the sum of all
intermediate tensors.

Graph outputs get their own buffers (they outlive the run); reshape aliases extend the
lifetime of the buffer they view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backend import Backend
from .plan import Specialised


@dataclass
class MemoryPlan:
    """Slot sizes per backend and the slot of each planned value."""

    slots: dict[str, list[int]] = field(default_factory=dict)  # backend -> slot sizes
    assignment: dict[str, tuple[str, int]] = field(default_factory=dict)  # value -> (backend, slot)
    last_use: dict[str, int] = field(default_factory=dict)  # value -> step index
    intermediate_bytes: int = 0  # sum of every planned device intermediate
    output_bytes: int = 0  # dedicated buffers of graph outputs

    @property
    def peak_bytes(self) -> int:
        """Planned peak device memory for intermediates and outputs (weights excluded)."""
        return sum(sum(s) for s in self.slots.values()) + self.output_bytes


def plan_memory(
    spec: Specialised,
    backends: dict[str, Backend],
    outputs: set[str],
    extra_reads: dict[int, list[str]],
) -> MemoryPlan:
    """Assign device intermediates of a specialised graph to reusable slots.

    ``extra_reads`` lists, per step index, names read besides the node inputs (subgraph
    outer-scope names)."""
    mp = MemoryPlan()
    for i, step in enumerate(spec.steps):
        for name in [*step.node.inputs, *extra_reads.get(i, [])]:
            if name:
                mp.last_use[name] = i
    for name in outputs:
        mp.last_use[name] = len(spec.steps)
    _extend_for_runtime_views(spec, extra_reads, mp.last_use)
    root: dict[str, str] = {}  # alias -> the value owning the buffer
    size: dict[str, tuple[str, int]] = {}  # owning value -> (backend, bytes)
    for step in spec.steps:
        if step.location not in backends:
            continue
        backend = backends[step.location]
        for j, name in enumerate(step.node.outputs):
            if not name or j >= len(step.outputs):
                continue
            if j in step.aliases:
                src = step.node.inputs[step.aliases[j]]
                root[name] = root.get(src, src)
                continue
            info = step.outputs[j]
            nbytes = info.size * backend.storage_dtype(info.dtype).itemsize
            size[name] = (step.location, nbytes)
    groups: dict[str, list[str]] = {}
    for alias, owner in root.items():
        groups.setdefault(owner, []).append(alias)
    for owner, members in groups.items():  # a view keeps the buffer it views alive
        mp.last_use[owner] = max(mp.last_use.get(m, -1) for m in [owner, *members])
    end: dict[str, int] = {}
    dedicated: set[str] = set()
    for owner in size:
        members = [owner, *groups.get(owner, [])]
        end[owner] = max(mp.last_use.get(m, -1) for m in members)
        if any(m in outputs for m in members):
            dedicated.add(owner)
    free: dict[str, list[int]] = {}  # backend -> free slot numbers
    mp.slots = {name: [] for name in backends}
    releases: dict[int, list[str]] = {}
    for i, step in enumerate(spec.steps):
        for name in step.node.outputs:
            if name not in size:
                continue
            backend, nbytes = size[name]
            mp.intermediate_bytes += nbytes
            if name in dedicated:
                mp.output_bytes += nbytes
                continue
            slots, pool = mp.slots[backend], free.setdefault(backend, [])
            fits = [s for s in pool if slots[s] >= nbytes]
            if fits:
                slot = min(fits, key=lambda s: slots[s])
            elif pool:  # grow the largest free slot rather than adding one
                slot = max(pool, key=lambda s: slots[s])
                slots[slot] = nbytes
            else:
                slots.append(nbytes)
                slot = len(slots) - 1
            if slot in pool:
                pool.remove(slot)
            mp.assignment[name] = (backend, slot)
            # A value nobody reads is released right after its producer.
            releases.setdefault(max(end[name], i), []).append(name)
        for name in releases.pop(i, []):
            backend, slot = mp.assignment[name]
            free[backend].append(slot)
    return mp


def _extend_for_runtime_views(spec: Specialised, extra_reads: dict[int, list[str]],
                              last_use: dict[str, int]) -> None:
    """A step specialised only when it runs ("dynamic") may turn out to be a view of an
    input (Reshape, Unsqueeze, a same-type Cast), and a control-flow body may return an
    outer value it read as a new handle on that buffer: either way the input's buffer
    must live as long as the step's outputs. Later steps first, so chains of such views
    extend all the way back."""
    for i in range(len(spec.steps) - 1, -1, -1):
        step = spec.steps[i]
        if step.kind not in ("dynamic", "control"):
            continue
        end = max((last_use.get(o, -1) for o in step.node.outputs if o), default=-1)
        for name in [*step.node.inputs, *extra_reads.get(i, [])]:
            if name and last_use.get(name, -1) < end:
                last_use[name] = end

