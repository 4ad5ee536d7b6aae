"""Run a node's lowering on a backend: specialise and compile once, launch many times."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .backend import Backend, Buffer
from .dtypes import DType, dtype as as_dtype
from .errors import InvalidInputError
from .op import (
    Check,
    Data,
    HostOnly,
    In,
    Launch,
    Lowering,
    Node,
    OpDef,
    Out,
    Ref,
    TensorInfo,
    Tmp,
)
from .tensor import DeviceTensor

T = TypeVar("T")


def _itemsize(backend: Backend, dt: Any) -> int:
    try:
        return backend.storage_dtype(dt).itemsize
    except InvalidInputError:
        return as_dtype(dt).itemsize


def _resolve(
    ref: Ref,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    temps: Sequence[Any],
    data: Callable[[Data], Any],
) -> Any:
    """What a launch's reference names: an input (never an omitted one), an output, a
    temporary, or ``data(ref)`` for an array the lowering carries."""
    if isinstance(ref, In):
        found = inputs[ref.index]
        if found is None:
            raise InvalidInputError(f"launch reads omitted input {ref.index}")
        return found
    if isinstance(ref, Out):
        return outputs[ref.index]
    if isinstance(ref, Tmp):
        return temps[ref.index]
    return data(ref)


@dataclass(frozen=True)
class _Counts:
    """The int32 counts buffer of check number ``index`` (persistent, see ``Check``)."""

    index: int


@dataclass
class _Step:
    program: Any
    inputs: list[Ref]
    output: Out | Tmp | _Counts
    size: int
    name: str = ""  # the kernel's name (profiles)
    nbytes: int = 0  # bytes the launch reads and writes (profiles)


class PreparedLowering:
    """A lowering specialised for concrete shapes and compiled on one backend."""

    def __init__(
        self,
        backend: Backend,
        lowering: Lowering,
        inputs: Sequence[TensorInfo | None],
        outputs: Sequence[TensorInfo],
    ) -> None:
        self.backend = backend
        self.lowering = lowering
        self.temps = list(lowering.temps)
        self.checks: list[Check] = list(lowering.checks)
        self._data: dict[int, DeviceTensor] = {}
        self._counts: list[DeviceTensor] = []
        self.steps: list[_Step] = []

        def info(ref: Ref | _Counts) -> TensorInfo:
            if isinstance(ref, _Counts):
                return TensorInfo(DType.int32, (self.checks[ref.index].size,))
            return _resolve(ref, inputs, outputs, self.temps, lambda d: TensorInfo(
                as_dtype(d.array.dtype), tuple(d.array.shape)))  # fmt: skip

        planned = [(c.kernel, c.inputs, _Counts(n), c.consts, Launch(c.kernel, [], Out(0)))
                   for n, c in enumerate(self.checks)]
        planned += [(la.kernel, la.inputs, la.output, la.consts, la) for la in lowering.launches]
        for kernel, in_refs, out_ref, consts, launch in planned:  # checks first: ``verify``
            *ins, out = launch.viewed([info(r) for r in [*in_refs, out_ref]])
            spec = kernel.specialize([(i.shape, i.dtype) for i in ins], (out.shape, out.dtype),
                                     **consts)  # fmt: skip
            program = backend.compile(spec)
            for ref in in_refs:
                if isinstance(ref, Data) and id(ref.array) not in self._data:
                    self._data[id(ref.array)] = DeviceTensor.from_numpy(backend, ref.array)
            moved = sum(b.size * _itemsize(backend, b.dtype) for b in (*spec.inputs, spec.output))
            self.steps.append(
                _Step(program, in_refs, out_ref, spec.output.size, spec.name, moved)
            )
        self._counts = [DeviceTensor.empty(backend, (c.size,), DType.int32) for c in self.checks]

    def run(self, inputs: Sequence[DeviceTensor | None], outputs: Sequence[DeviceTensor]) -> None:
        """Queue every launch; temporaries are freed (returned to the pool) afterwards."""
        temps = [DeviceTensor.empty(self.backend, t.shape, t.dtype) for t in self.temps]  # type: ignore[arg-type]
        try:
            refs = self.launch_refs(
                [None if t is None else t.buffer for t in inputs],
                [t.buffer for t in outputs],
                [t.buffer for t in temps],
            )
            for step, output, buffers in refs:
                self.backend.launch(step.program, output, buffers)
        finally:
            for t in temps:
                t.close()

    def launch_refs(
        self, inputs: Sequence[T | None], outputs: Sequence[T], temps: Sequence[T]
    ) -> list[tuple[_Step, T | Buffer, list[T | Buffer]]]:
        """Every non-empty launch as ``(step, output, inputs)`` (``step.program`` is what
        the backend compiled), each buffer taken from
        ``inputs``/``outputs``/``temps`` (any stand-ins: recorded plans pass references) or,
        for data the lowering carries, its device buffer. What a recorded plan binds once."""

        def pick(ref: Ref | _Counts) -> T | Buffer:
            if isinstance(ref, _Counts):
                return self._counts[ref.index].buffer
            return _resolve(ref, inputs, outputs, temps, lambda d: self._data[id(d.array)].buffer)

        return [
            (step, pick(step.output), [pick(r) for r in step.inputs])
            for step in self.steps
            if step.size
        ]

    @property
    def n_launches(self) -> int:
        """Launches one ``run`` issues."""
        return sum(1 for step in self.steps if step.size)

    def verify(self) -> None:
        """Raise InvalidInputError for the first check whose counts are not all zero. Called
        after the last launch of a run reads the counts (a device round trip only for
        lowerings that have checks); the launches themselves never fault on bad values
        (indices are wrapped and clamped), so deferring the check loses nothing."""
        for check, counts in zip(self.checks, self._counts):
            total = int(counts.numpy().astype(np.int64).sum())
            if total:
                raise InvalidInputError(check.message.format(count=total))

    def close(self) -> None:
        for t in [*self._data.values(), *self._counts]:
            t.close()
        self._data.clear()
        self._counts.clear()


def run_node(
    backend: Backend, op: OpDef, node: Node, inputs: Sequence[np.ndarray | None]
) -> list[np.ndarray]:
    """Run one node on ``backend`` from host arrays (op development and tests).

    Only the inputs listed in ``op.value_inputs`` have their values known at planning time,
    as in a session where they are constants."""
    arrays = [None if a is None else np.asarray(a) for a in inputs]
    infos = [None if a is None else TensorInfo(as_dtype(a.dtype), tuple(a.shape)) for a in arrays]
    values = [a if i in op.value_inputs else None for i, a in enumerate(arrays)]
    outs = op.infer(node, infos, values)
    if op.host_only:
        return op.reference(node, arrays)
    try:
        lowering = op.lower(node, infos, outs, values)
    except HostOnly:
        return op.reference(node, arrays)  # as the session does: declared, computed on the host
    prepared = PreparedLowering(backend, lowering, infos, outs)
    in_tensors = [None if a is None else DeviceTensor.from_numpy(backend, a) for a in arrays]
    out_tensors: list[DeviceTensor] = []
    for i, o in enumerate(outs):
        if i in lowering.aliases:
            src = in_tensors[lowering.aliases[i]]
            assert src is not None
            out_tensors.append(src.reshape(o.shape))  # type: ignore[arg-type]
        else:
            out_tensors.append(DeviceTensor.empty(backend, o.shape, o.dtype))  # type: ignore[arg-type]
    try:
        prepared.run(in_tensors, out_tensors)
        prepared.verify()
        return [t.numpy() for t in out_tensors]
    finally:
        for t in out_tensors:
            t.close()
        for t in in_tensors:
            if t is not None:
                t.close()
        prepared.close()
