"""A model's recorded plan as data: what the exporters (``export-wasm``, ``export-web``) write.

:func:`record_model` plans a model on one backend for fixed input shapes, runs it twice on
zeros (the second run records the plan, ``spawnml.graph.record``) and returns the launch
sequence with every buffer resolved to a numbered :class:`ExportBuffer`: the constants
with their bytes, the feeds, the outputs, the intermediates (the memory plan's slots, so
intermediates share buffers as in a session) and the index checks' count buffers. A target
lays those buffers out (Wasm: addresses in one memory; WebGPU: one GPU buffer each) and
writes its compiled programs; no exporter walks the session's internals itself.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .backend import Backend, Buffer
from .dtypes import DType
from .errors import ExportError, InvalidInputError


@dataclass
class ExportBuffer:
    """One buffer of the exported plan. ``kind``: ``weight`` (``data`` holds its bytes),
    ``input``, ``output``, ``intermediate`` or ``counts`` (an index check's counts)."""

    nbytes: int
    kind: str
    data: bytes | None = None


@dataclass(frozen=True)
class ExportTensor:
    """A model input or output: its logical dtype, the dtype the backend stores it as, and
    the buffer holding it."""

    name: str
    dtype: DType
    storage: DType
    shape: tuple[int, ...]
    buffer: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.storage.itemsize

    def manifest(self) -> dict[str, Any]:
        """The tensor as a web runtime reads it (``toStorage``/``fromStorage``)."""
        return {"name": self.name, "dtype": self.dtype.name, "storage": self.storage.name,
                "shape": list(self.shape), "bytes": self.nbytes, "buffer": self.buffer}


@dataclass(frozen=True)
class ExportLaunch:
    """One kernel launch: the backend's compiled program, its output and input buffers."""

    program: Any
    out: int
    ins: tuple[int, ...]
    label: str


@dataclass(frozen=True)
class ExportCheck:
    """An index check: a nonzero count in ``buffer`` (``size`` int32s) after a run means the
    feeds indexed out of range; ``message`` says so (``{count}``: the total)."""

    buffer: int
    size: int
    message: str


@dataclass
class RecordedModel:
    """A model's plan on ``backend`` for fixed input shapes, as numbered buffers."""

    backend: Backend
    buffers: list[ExportBuffer] = field(default_factory=list)
    inputs: list[ExportTensor] = field(default_factory=list)
    outputs: list[ExportTensor] = field(default_factory=list)
    launches: list[ExportLaunch] = field(default_factory=list)
    checks: list[ExportCheck] = field(default_factory=list)

    def programs(self) -> list[Any]:
        """The distinct programs, in order of first launch (``program.key`` identifies one)."""
        seen: dict[str, Any] = {}
        for launch in self.launches:
            seen.setdefault(launch.program.key, launch.program)
        return list(seen.values())

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Replay the plan on its backend, as a page does: fresh buffers, the weights'
        bytes, the feeds, every launch in order, then the outputs and the index checks.
        For tests and for checking a plan before it is written."""
        backend = self.backend
        names = sorted(feeds)
        if names != sorted(t.name for t in self.inputs):
            raise InvalidInputError(f"feeds: expected {sorted(t.name for t in self.inputs)}, "
                                    f"got {names}")  # fmt: skip
        buffers = [backend.alloc(max(b.nbytes, 4)) for b in self.buffers]
        try:
            for buffer, plan in zip(buffers, self.buffers, strict=True):
                if plan.data is not None:
                    backend.write_bytes(buffer, plan.data)
                elif plan.kind == "counts":
                    backend.write_bytes(buffer, bytes(plan.nbytes))
            for t in self.inputs:
                value = np.asarray(feeds[t.name])
                if value.shape != t.shape:
                    raise InvalidInputError(f"input {t.name!r}: expected shape {t.shape}, "
                                            f"got {value.shape}")  # fmt: skip
                backend.upload(value.astype(t.dtype.numpy, copy=False), buffers[t.buffer])
            for launch in self.launches:
                backend.launch(launch.program, buffers[launch.out],
                               [buffers[n] for n in launch.ins])
            for check in self.checks:
                total = int(backend.download(buffers[check.buffer], (check.size,), "int32").sum())
                if total:
                    raise InvalidInputError(check.message.replace("{count}", str(total)))
            return {t.name: backend.download(buffers[t.buffer], t.shape, t.dtype)
                    for t in self.outputs}
        finally:
            for buffer in buffers:
                backend.free(buffer)

    def add_buffer(self, nbytes: int, kind: str = "intermediate", data: bytes | None = None
                   ) -> int:
        """A new buffer's number."""
        self.buffers.append(ExportBuffer(int(nbytes), kind, data))
        return len(self.buffers) - 1

    def add_input(self, name: str, dtype: DType, shape: tuple[int, ...]) -> ExportTensor:
        """A new input of the plan in a buffer of its own."""
        storage = self.backend.storage_dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * storage.itemsize
        tensor = ExportTensor(name, dtype, storage, tuple(shape), self.add_buffer(nbytes, "input"))
        self.inputs.append(tensor)
        return tensor

    def add_output(self, name: str, dtype: DType, shape: tuple[int, ...], buffer: int
                   ) -> ExportTensor:
        """Name ``buffer`` (written by a launch of the plan) as an output."""
        if self.buffers[buffer].kind not in ("intermediate", "output"):
            raise ExportError(f"output {name!r}: buffer {buffer} is not computed by the plan "
                              f"(it holds {self.buffers[buffer].kind} data)")
        self.buffers[buffer].kind = "output"
        tensor = ExportTensor(name, dtype, self.backend.storage_dtype(dtype), tuple(shape),
                              buffer)
        self.outputs.append(tensor)
        return tensor

    def splice(self, other: RecordedModel, feeds: Mapping[str, int],
               shared: dict[int, int] | None = None) -> dict[str, int]:
        """Append ``other``'s launches with its inputs read from this plan's buffers
        ``feeds`` (by input name); returns the buffer holding each of its outputs (new
        buffers, so a later splice does not overwrite them). Pass the same ``shared`` dict
        to splices of one model: its weights and intermediates are then added once."""
        if other.backend is not self.backend:
            raise ExportError(f"cannot splice a {other.backend.name} plan into a "
                              f"{self.backend.name} plan")
        missing = sorted({t.name for t in other.inputs} - set(feeds))
        if missing:
            raise ExportError(f"splice: no buffer given for the inputs {missing}")
        shared = {} if shared is None else shared
        local: dict[int, int] = {}
        for t in other.inputs:
            given = self.buffers[feeds[t.name]].nbytes
            if given < t.nbytes:
                raise ExportError(f"splice: input {t.name!r} needs {t.nbytes} bytes, the "
                                  f"buffer given holds {given}")
            local[t.buffer] = feeds[t.name]
        outputs = {t.name: self.add_buffer(t.nbytes) for t in other.outputs}
        local.update({t.buffer: outputs[t.name] for t in other.outputs})
        for n, buffer in enumerate(other.buffers):
            if n not in local and n not in shared:
                kind = "intermediate" if buffer.kind in ("input", "output") else buffer.kind
                shared[n] = self.add_buffer(buffer.nbytes, kind, buffer.data)

        def number(n: int) -> int:
            return local[n] if n in local else shared[n]

        for launch in other.launches:
            self.launches.append(ExportLaunch(launch.program, number(launch.out),
                                              tuple(number(n) for n in launch.ins),
                                              launch.label))  # fmt: skip
        for check in other.checks:
            if all(c.buffer != number(check.buffer) for c in self.checks):
                self.checks.append(ExportCheck(number(check.buffer), check.size, check.message))
        return outputs


def parse_shapes(specs: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=D0,D1,...`` arguments as ``{name: dims}``."""
    shapes = {}
    for spec in specs or []:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            shape = (-1,)
        if not sep or not name or any(d < 0 for d in shape):
            raise InvalidInputError(f"--shape expects NAME=D0,D1,... (dims >= 0), got {spec!r}")
        shapes[name] = shape
    return shapes


def add_shape_argument(parser: argparse.ArgumentParser) -> None:
    """The exporters' ``--shape NAME=D0,D1,...`` option."""
    parser.add_argument("--shape", action="append", metavar="NAME=D0,D1,...",
                        help="fix a dynamic input's shape (repeatable)")


def fixed_input_shapes(session: Any, shapes: Mapping[str, tuple[int, ...]]
                       ) -> dict[str, tuple[int, ...]]:
    """Every input's shape: the model's own where static, else from ``shapes`` (which must
    agree with the model's static dims and name only inputs)."""
    out = {}
    for arg in session.get_inputs():
        given = shapes.get(arg.name)
        dims = list(arg.shape) if arg.shape is not None else None
        if given is not None:
            if dims is not None and (len(given) != len(dims) or any(
                    isinstance(d, int) and d != g for d, g in zip(dims, given))):
                raise InvalidInputError(
                    f"--shape {arg.name}: the model declares {tuple(dims)}, got {tuple(given)}")
            out[arg.name] = tuple(int(g) for g in given)
        elif dims is None or not all(isinstance(d, int) for d in dims):
            raise InvalidInputError(
                f"input {arg.name!r} has the dynamic shape {dims}: fix it with "
                f"--shape {arg.name}=D0,D1,... (an exported model has fixed shapes)")
        else:
            out[arg.name] = tuple(dims)
    unknown = sorted(set(shapes) - set(out))
    if unknown:
        raise InvalidInputError(f"--shape names {unknown}, which are not model inputs "
                                f"(inputs: {sorted(out)})")  # fmt: skip
    return out


def record_model(model: Any, backend: Backend,
                 shapes: Mapping[str, tuple[int, ...]] | None = None) -> RecordedModel:
    """Plan and record ``model`` (a path, bytes or ModelProto) on ``backend`` alone for
    fixed input shapes; ExportError when a step is not a kernel launch on it."""
    import spawnml
    from spawnml.tensor import DeviceTensor

    session = spawnml.InferenceSession(model, backends=[backend])
    fixed = fixed_input_shapes(session, dict(shapes or {}))
    feeds = {}
    for value in session.graph.inputs:
        if value.name not in fixed:
            continue  # an initializer listed as an input: it keeps its value
        if value.info is None:
            raise ExportError(f"input {value.name!r} has no declared type")
        dt = backend.storage_dtype(value.info.dtype)
        feeds[value.name] = DeviceTensor.from_numpy(backend, np.zeros(fixed[value.name],
                                                                      dt.numpy))
    names = [o.name for o in session.get_outputs()]
    for _ in range(2):  # the second run records the plan
        session.run(names, feeds)
    plan = session._runner.last_plan
    recordings = [r for r in plan.recordings.values() if r is not None]
    if not recordings:
        raise ExportError(f"the model's plan cannot be recorded: {plan.not_recorded}")
    return _number(recordings[0], session, backend, names)


def _key(buffer: Buffer) -> Any:
    """What identifies a buffer's memory: its native handle where hashable (two Buffer
    objects over one allocation are one buffer), else the object."""
    try:
        hash(buffer.handle)
    except TypeError:
        return id(buffer)
    return buffer.handle


def _number(rec: Any, session: Any, backend: Backend, names: list[str]) -> RecordedModel:
    """The recording's launches over numbered buffers: constants first (in order of first
    use), then the inputs, the outputs, and the rest in order of first use."""
    out = RecordedModel(backend)
    index: dict[Any, int] = {}
    counts = {_key(t.buffer): (t, c) for p in rec.checked
              for t, c in zip(p._counts, p.checks, strict=True)}  # fmt: skip

    def add(key: Any, nbytes: int, kind: str, data: bytes | None = None) -> int:
        if key not in index:
            index[key] = len(out.buffers)
            out.buffers.append(ExportBuffer(nbytes, kind, data))
        return index[key]

    launches = []
    for item in rec.items:
        if type(item).__name__ != "_Launch" or item.kernel is not None or (
                item.backend is not backend):
            label = getattr(item, "label", None) or item.step.node.describe()
            raise ExportError(f"{label} does not run as a {backend.name} kernel of the plan; "
                              "an exported model holds only those")  # fmt: skip
        launches.append(item)
        for ref in [item.out, *item.ins]:
            if isinstance(ref, Buffer) and _key(ref) not in counts:
                add(("fixed", _key(ref)), ref.nbytes, "weight", backend.read_bytes(ref))

    def tensor(name: str, root: int, kind: str) -> ExportTensor:
        val = rec.vals[(name, backend.name)]
        storage = backend.storage_dtype(val.dtype)
        buffer = add(("root", root), rec.roots[root].nbytes, kind)
        return ExportTensor(name, val.dtype, storage, tuple(val.shape), buffer)

    for arg in session.get_inputs():
        out.inputs.append(tensor(arg.name, rec.feed_roots[arg.name], "input"))
    for name in names:
        where = rec.home.get(name)
        val = rec.vals.get((name, where)) if where else None
        if val is None or val.root < 0 or rec.roots[val.root].external:
            raise ExportError(f"output {name!r} is not computed by a kernel of the plan "
                              "(a constant or an input passed through)")  # fmt: skip
        out.outputs.append(tensor(name, val.root, "output"))
    for item in launches:
        program = item.program.program

        def number(ref: Any) -> int:
            if isinstance(ref, Buffer) and _key(ref) in counts:
                t, check = counts[_key(ref)]
                n = add(("counts", _key(ref)), ref.nbytes, "counts")
                if all(c.buffer != n for c in out.checks):
                    out.checks.append(ExportCheck(n, t.size, check.message))
                return n
            if isinstance(ref, Buffer):
                return index[("fixed", _key(ref))]
            return add(("root", ref), rec.roots[ref].nbytes, "intermediate")

        out.launches.append(ExportLaunch(program, number(item.out),
                                         tuple(number(r) for r in item.ins),
                                         item.step.node.describe()))  # fmt: skip
    return out


WEIGHT_PART_BYTES = 1 << 20
"""The weights file is verified in parts of this size (a browser hashes one part at a time,
never holding the whole file)."""


def weights_manifest(data: bytes, file: str, part_bytes: int = WEIGHT_PART_BYTES
                     ) -> dict[str, Any]:
    """The manifest entry of a weights file: its size, its sha256 and one sha256 per part of
    ``part_bytes`` (a multiple of 16) so that a reader can verify it as it streams."""
    assert part_bytes % 16 == 0
    parts = [{"offset": at, "bytes": len(data[at:at + part_bytes]),
              "sha256": hashlib.sha256(data[at:at + part_bytes]).hexdigest()}
             for at in range(0, len(data), part_bytes)]  # fmt: skip
    return {"file": file, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "parts": parts}


def write_weights(recorded: RecordedModel, path: Path) -> dict[str, Any]:
    """Write every weight of ``recorded`` into one file, each 16-byte aligned; its manifest
    entry (``weights_manifest``) with ``tensors``: each weight's buffer, offset and size."""
    data = bytearray()
    tensors = []
    for n, buffer in enumerate(recorded.buffers):
        if buffer.kind == "weight":
            assert buffer.data is not None
            tensors.append({"buffer": n, "offset": len(data), "bytes": buffer.nbytes})
            data += buffer.data + bytes(-len(buffer.data) % 16)
    path.write_bytes(data)
    return {**weights_manifest(bytes(data), path.name), "tensors": tensors}


class WebTarget:
    """A target of ``spawnml export-web`` (registered with the
    ``spawnml_register_web_targets`` hook): the backend a page runs the model on.

    ``backend()`` makes the backend configured as a browser will run it (limits every
    browser grants, no optional features); ``write(recorded, directory)`` writes the
    compiled kernels, the plan and the weights into ``directory`` and returns its manifest,
    saved as ``model.json`` beside them, whose ``runtime`` names the ES module (also written
    there) that runs it. That module exports ``available(options)`` (true, or why not) and
    ``createSession(manifest, directoryUrl, weights, options)``; see docs/export-web.md.
    ``options`` are the export's (``threads``); a target ignores those it has no use for."""

    name: str = ""

    def backend(self) -> Backend:
        raise NotImplementedError

    def write(self, recorded: RecordedModel, directory: Path, **options: Any
              ) -> dict[str, Any]:
        raise NotImplementedError


def web_targets() -> dict[str, WebTarget]:
    """Every registered export-web target by name."""
    from .plugins import get_plugin_manager

    found: dict[str, WebTarget] = {}

    def register(target: WebTarget) -> None:
        found.setdefault(target.name, target)

    get_plugin_manager().pm.hook.spawnml_register_web_targets(register=register)
    return found


__all__ = [
    "WEIGHT_PART_BYTES", "ExportBuffer", "ExportCheck", "ExportLaunch", "ExportTensor",
    "RecordedModel", "WebTarget", "add_shape_argument", "fixed_input_shapes", "parse_shapes",
    "record_model", "web_targets", "weights_manifest", "write_weights",
]
