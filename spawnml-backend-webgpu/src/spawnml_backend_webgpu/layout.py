"""How a kernel meets the device's limits: its storage bindings and its dispatch grid.

Both are decided once per specialisation, from the device limits, and shared by the WGSL
renderer (declarations, loads, ``gid``) and the runtime (bind groups, copies, dispatch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spawnml.dtypes import DType
from spawnml.errors import KernelCompileError
from spawnml.kernel.ir import KernelIR

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
    limit, inputs packed into one binding per storage type (at most four plus the output)."""
    grid = dispatch_grid(kernel.size, max_per_dim)
    storages = [storage_dtype(spec.dtype) for spec in kernel.inputs]
    if len(kernel.inputs) + 1 <= max_storage_buffers:
        bindings = tuple(
            Binding(s, (Member(i, 0, spec.size, s.itemsize),), packed=False)
            for i, (spec, s) in enumerate(zip(kernel.inputs, storages, strict=True))
        )
        return Layout(bindings, tuple((i, 0) for i in range(len(bindings))), grid)
    order = list(dict.fromkeys(storages))
    if len(order) + 1 > max_storage_buffers:
        raise KernelCompileError(
            f"webgpu: kernel {kernel.name} reads {len(order)} storage types; the device allows "
            f"{max_storage_buffers} storage buffers per shader stage"
        )
    members: dict[DType, list[Member]] = {s: [] for s in order}
    where: list[tuple[int, int]] = []
    for i, (spec, s) in enumerate(zip(kernel.inputs, storages, strict=True)):
        group = members[s]
        offset = 0
        if group:
            last = group[-1]
            offset = (last.byte_offset + last.copy_bytes) // s.itemsize
        group.append(Member(i, offset, spec.size, s.itemsize))
        where.append((order.index(s), offset))
    bindings = tuple(Binding(s, tuple(members[s]), packed=True) for s in order)
    return Layout(bindings, tuple(where), grid)
