"""How a kernel meets the device's limits: its storage bindings and its dispatch grid.

Both are decided once per specialisation, from the device limits, and shared by the WGSL
renderer (declarations, loads, ``gid``) and the runtime (bind groups, copies, dispatch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spawnml.dtypes import DType
from spawnml.errors import KernelCompileError
from spawnml.kernel.ir import BufferSpec, KernelIR
from spawnml.kernel.slots import assign_slots

WORKGROUP_SIZE = 64
COPY_ALIGN = 4  # copy_buffer_to_buffer offsets and sizes are multiples of 4 bytes


@dataclass(frozen=True)
class Member:
    """Input ``input`` lives in its binding from element ``offset`` (``count`` elements)."""

    input: int
    offset: int
    count: int
    itemsize: int

    @property
    def byte_offset(self) -> int:
        return self.offset * self.itemsize

    @property
    def copy_bytes(self) -> int:
        """Bytes copied into a packed binding (rounded up to the copy alignment)."""
        return -(-self.count * self.itemsize // COPY_ALIGN) * COPY_ALIGN


@dataclass(frozen=True)
class Binding:
    """One read-only storage binding: a single input, or several packed one after another."""

    storage: DType
    members: tuple[Member, ...]
    packed: bool

    @property
    def nbytes(self) -> int:
        last = self.members[-1]
        return last.byte_offset + last.copy_bytes


@dataclass(frozen=True)
class Layout:
    """The bindings of a kernel's inputs (output is binding ``len(inputs)``) and its grid."""

    inputs: tuple[Binding, ...]
    where: tuple[tuple[int, int], ...]  # per kernel input: (binding number, element offset)
    grid: tuple[int, int, int]  # workgroups in x, y, z

    @property
    def packed(self) -> bool:
        return any(b.packed for b in self.inputs)

    def slots(self) -> tuple[tuple[tuple[int, int], ...], tuple[BufferSpec, ...]]:
        """Where each input is read and the bindings' specs (``spawnml.kernel.passes``)."""
        specs = tuple(
            BufferSpec(f"in{n}", b.storage, (b.nbytes // b.storage.itemsize,))
            for n, b in enumerate(self.inputs)
        )
        return self.where, specs


def dispatch_grid(invocations: int, max_per_dim: int) -> tuple[int, int, int]:
    """Workgroups per dimension covering ``invocations`` within the per-dimension limit."""
    groups = max(1, -(-invocations // WORKGROUP_SIZE))
    x = min(groups, max_per_dim)
    rest = -(-groups // x)
    y = min(rest, max_per_dim)
    z = -(-rest // y)
    if z > max_per_dim:
        raise KernelCompileError(
            f"webgpu: {invocations} output elements need more than {max_per_dim}³ workgroups"
        )
    return x, y, z


def plan(
    kernel: KernelIR,
    storage_dtype: Callable[[DType], DType],
    max_storage_buffers: int,
    max_per_dim: int,
) -> Layout:
    """One binding per input, or, when inputs + output exceed the per-stage storage buffer
    limit, the last inputs packed into one binding per storage type (``spawnml.kernel.slots``),
    each member starting on a copy-aligned element."""
    grid = dispatch_grid(kernel.size, max_per_dim)
    storages = [storage_dtype(spec.dtype) for spec in kernel.inputs]
    footprints = [
        -(-spec.size * s.itemsize // COPY_ALIGN) * COPY_ALIGN // s.itemsize
        for spec, s in zip(kernel.inputs, storages, strict=True)
    ]
    slots = assign_slots(footprints, storages, max_storage_buffers - 1, f"webgpu: {kernel.name}")
    bindings = []
    for n in range(slots.count):
        members = slots.members(n)
        s = storages[members[0][0]]
        bindings.append(Binding(
            s, tuple(Member(i, off, kernel.inputs[i].size, s.itemsize) for i, off in members),
            packed=n >= slots.direct,
        ))
    return Layout(tuple(bindings), slots.where, grid)
