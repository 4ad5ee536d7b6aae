"""Inputs into a target's limited input slots (WebGPU storage bindings, WebGL texture units).

When a kernel has more inputs than the target has slots, the first inputs keep a slot each
and the rest are packed one after another into one slot per group (inputs of one group can
share a slot: one storage type on WebGPU, any 32-bit words on WebGL), as many direct as fit.
The runtime copies packed inputs into their slot before a launch; the core pass
:func:`spawnml.kernel.passes.pack_inputs` rewrites the kernel's loads to read them there.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..errors import KernelCompileError


@dataclass(frozen=True)
class SlotAssignment:
    """Input ``i`` is read from slot ``where[i][0]`` at element offset ``where[i][1]``;
    slots ``0 .. direct - 1`` hold one input each, the others are packed."""

    where: tuple[tuple[int, int], ...]
    direct: int

    @property
    def count(self) -> int:
        return max((slot for slot, _ in self.where), default=-1) + 1

    def members(self, slot: int) -> list[tuple[int, int]]:
        """(input, element offset) of the inputs in ``slot``, in order."""
        return [(i, off) for i, (s, off) in enumerate(self.where) if s == slot]


def assign_slots(
    footprints: Sequence[int], groups: Sequence[Hashable], capacity: int, what: str = "kernel"
) -> SlotAssignment:
    """Slots for inputs occupying ``footprints[i]`` elements when packed (alignment included),
    packable with the inputs of the same group, on a target with ``capacity`` input slots."""
    n = len(footprints)
    if n <= capacity:
        return SlotAssignment(tuple((i, 0) for i in range(n)), n)
    direct = next(
        (d for d in range(n - 1, -1, -1) if d + len(set(groups[d:])) <= capacity), None
    )
    if direct is None:
        raise KernelCompileError(
            f"{what} reads {len(set(groups))} kinds of input that cannot share a slot; the "
            f"target has {capacity} input slots"
        )
    where: list[tuple[int, int]] = [(i, 0) for i in range(direct)]
    order = list(dict.fromkeys(groups[direct:]))
    ends = dict.fromkeys(order, 0)
    for i in range(direct, n):
        g = groups[i]
        where.append((direct + order.index(g), ends[g]))
        ends[g] += footprints[i]
    return SlotAssignment(tuple(where), direct)
