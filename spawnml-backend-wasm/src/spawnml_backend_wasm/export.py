"""``spawnml export-wasm``: a whole model as one self-contained WebAssembly module.

The model is planned and recorded on a one-thread wasm backend for fixed input shapes; the
recorded launch sequence (every kernel, every buffer address resolved) becomes one module:

- ``model.wasm``: its own linear memory, every kernel of the plan (``link``), and a ``run``
  that calls them in order over their whole output range. Buffers are laid out afresh:
  error messages below 1 KiB, then the weights, the inputs, the outputs and the
  intermediates (the memory plan's slots, so intermediates share memory as in a session).
- ``model.weights``: the constant buffers' bytes, in the order the module expects them at
  ``weights_ptr()``; the module verifies their size and a checksum in ``load``.
- ``model.json``: the manifest (inputs and outputs with names, dtypes, shapes and bytes, the
  weights' sha256, the ABI version).
- ``spawnml-model.mjs`` and ``run.mjs``: a small ES-module loader (node and browsers) and a
  node command that runs the model on raw input files.
- ``wasi-run.wasm``: the same command for WASI runtimes such as the wasmtime CLI
  (``wasi_runner``).

The ABI (all i32; a status is 0 or an error code, ``error_message(code)`` points at its
NUL-terminated text; a bad call returns a code, never traps):

    weights_ptr() weights_size() load(nbytes) -> status
    input_count() input_ptr(i) input_size(i) set_input(i, nbytes) -> status
    output_count() output_ptr(i) output_size(i)
    run() -> status          (needs load() and every input set)
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spawnml.errors import ExportError, InvalidInputError
from spawnml.export import RecordedModel, record_model, weights_manifest

from .link import link
from .memory import SLACK
from .plan import BARRIER, sequence_body, split_step
from .wat import WatKernel

ABI_VERSION = 1
_MESSAGES_AT = 64
_BASE = 1024
_ALIGN = 16
PAGE = 65536
MAX_INPUTS = 31  # set_input keeps one bit per input

ERRORS = {
    1: "load: the weights have a different size than this module was exported with "
       "(a truncated file, or one from another export)",
    2: "load: the weights' checksum does not match (a corrupt file, or one from another "
       "export)",
    3: "run: call load() with the weights first",
    4: "input index out of range",
    5: "set_input: the byte count differs from input_size(i)",
    6: "run: every input must be written and declared with set_input(i, nbytes) first",
    7: "unknown error code",
    8: "run: an index input is out of range of the tensor it indexes (Gather, Scatter, ...); "
       "the outputs are not valid",
    9: "run_thread: the run was aborted (abort_threads: another thread failed); call "
       "reset_threads() before the next run",
}
OK, WEIGHTS_SIZE, WEIGHTS_CHECKSUM, NOT_LOADED, BAD_INDEX, INPUT_SIZE, INPUT_MISSING = range(7)
INDEX_OUT_OF_RANGE, ABORTED = 8, 9
_LOADED_AT, _SET_AT = 0, 4  # state words (in memory, so that every thread's instance sees them)
_BARRIER_AT = 16  # the threads' barrier: count, generation, abort flag (plan.BARRIER)

_RUNTIME = Path(__file__).parent / "web"


def checksum(data: bytes) -> int:
    """The module's weights checksum: sum of each little-endian u32 word times (2i + 1),
    mod 2**32 (every word's position counts; any single changed word changes it)."""
    words = np.frombuffer(data, "<u4")
    odd = (np.arange(words.size, dtype=np.uint32) * np.uint32(2) + np.uint32(1))
    return int(np.sum(words * odd, dtype=np.uint32))


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


@dataclass
class _Tensor:
    name: str
    dtype: str  # as stored in the module
    shape: tuple[int, ...]
    nbytes: int
    address: int = 0
    logical: str = ""  # the model's dtype (int64 is stored as int32)

    def manifest(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "logical": self.logical or self.dtype,
                "shape": list(self.shape), "bytes": self.nbytes, "offset": self.address}


@dataclass
class ExportedPlan:
    """A recorded plan laid out for one module: what ``module_text`` prints."""

    kernels: list[WatKernel] = field(default_factory=list)
    calls: list[tuple[int, int, int, list[int]]] = field(default_factory=list)  # k, n, out, ins
    weights: bytes = b""
    inputs: list[_Tensor] = field(default_factory=list)
    outputs: list[_Tensor] = field(default_factory=list)
    counts: list[tuple[int, int]] = field(default_factory=list)  # index checks: address, n
    parts: list[int] = field(default_factory=list)  # per call: how many threads split it
    programs: list[Any] = field(default_factory=list)  # per call: the backend's Program
    threads: int = 1
    end: int = _BASE

    @property
    def pages(self) -> int:
        return max(1, -(-self.end // PAGE))


def _wat_string(text: str) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02x}"
                   for b in text.encode())  # fmt: skip


def _table(name: str, values: list[int]) -> str:
    """``name(i) -> values[i]``, 0 for an index out of range."""
    arms = "".join(f"    (if (i32.eq (local.get $i) (i32.const {i})) "
                   f"(then (return (i32.const {v}))))\n" for i, v in enumerate(values))  # fmt: skip
    head = f'  (func ${name} (export "{name}") (param $i i32) (result i32)'
    return f"{head}\n{arms}    (i32.const 0))"


def _load_function(weights_at: int, weights: bytes) -> list[str]:
    """``load(nbytes)``: checks the size and checksum of the weights written by the host."""
    end = weights_at + len(weights)
    return [
        '  (func (export "load") (param $n i32) (result i32)',
        "    (local $p i32) (local $h i32) (local $i i32)",
        f"    (i32.store (i32.const {_LOADED_AT}) (i32.const 0))",
        f"    (if (i32.ne (local.get $n) (i32.const {len(weights)})) "
        f"(then (return (i32.const {WEIGHTS_SIZE}))))",
        f"    (local.set $p (i32.const {weights_at}))",
        "    (local.set $i (i32.const 1))",
        "    (block $done (loop $each",
        f"      (br_if $done (i32.ge_u (local.get $p) (i32.const {end})))",
        "      (local.set $h (i32.add (local.get $h) "
        "(i32.mul (i32.load (local.get $p)) (local.get $i))))",
        "      (local.set $i (i32.add (local.get $i) (i32.const 2)))",
        "      (local.set $p (i32.add (local.get $p) (i32.const 4)))",
        "      (br $each)))",
        f"    (if (i32.ne (local.get $h) (i32.const {_signed(checksum(weights))})) "
        f"(then (return (i32.const {WEIGHTS_CHECKSUM}))))",
        f"    (i32.store (i32.const {_LOADED_AT}) (i32.const 1))",
        f"    (i32.const {OK}))",
    ]


def _set_input_function(n_inputs: int) -> list[str]:
    """``set_input(i, nbytes)``: marks input i written when nbytes is its size."""
    set_word = f"(i32.load (i32.const {_SET_AT}))"
    bit = "(i32.shl (i32.const 1) (local.get $i))"
    return [
        '  (func (export "set_input") (param $i i32) (param $n i32) (result i32)',
        f"    (if (i32.ge_u (local.get $i) (i32.const {n_inputs})) "
        f"(then (return (i32.const {BAD_INDEX}))))",
        f"    (i32.store (i32.const {_SET_AT}) "
        f"(i32.and {set_word} (i32.xor {bit} (i32.const -1))))",
        "    (if (i32.ne (local.get $n) (call $input_size (local.get $i))) "
        f"(then (return (i32.const {INPUT_SIZE}))))",
        f"    (i32.store (i32.const {_SET_AT}) (i32.or {set_word} {bit}))",
        f"    (i32.const {OK}))",
    ]


def _ready_checks(n_inputs: int) -> list[str]:
    """``run``'s preconditions: the weights loaded and every input set."""
    return [
        f"    (if (i32.eqz (i32.load (i32.const {_LOADED_AT}))) "
        f"(then (return (i32.const {NOT_LOADED}))))",
        f"    (if (i32.ne (i32.load (i32.const {_SET_AT})) (i32.const {(1 << n_inputs) - 1})) "
        f"(then (return (i32.const {INPUT_MISSING}))))",
    ]


def _thread_functions(plan: ExportedPlan, checks: list[str]) -> list[str]:
    """``thread_count``, ``run_thread(tid)`` (every tid in 0..n-1 at once, one per thread:
    each takes its share of the split launches and the threads meet at barriers),
    ``reset_threads`` (before a run) and ``abort_threads`` (a host whose thread failed)."""
    n = plan.threads
    spec = [(k, size, parts, [f"(i32.const {out})", *(f"(i32.const {a})" for a in ins)])
            for (k, size, out, ins), parts in zip(plan.calls, plan.parts, strict=True)]
    barrier = f"(call $barrier (i32.const {_BARRIER_AT}) (local.get $nthreads))"
    return [
        BARRIER.replace('(func (export "abort") (param $at i32)',
                        '(func $abort (param $at i32)'),
        f'  (func (export "thread_count") (result i32) (i32.const {n}))',
        '  (func (export "reset_threads")',
        f"    (i32.store (i32.const {_BARRIER_AT}) (i32.const 0))",
        f"    (i32.store (i32.const {_BARRIER_AT + 8}) (i32.const 0)))",
        f'  (func (export "abort_threads") (call $abort (i32.const {_BARRIER_AT})))',
        '  (func (export "run_thread") (param $tid i32) (result i32)',
        "    (local $nthreads i32) (local $lo i32) (local $hi i32)",
        f"    (local.set $nthreads (i32.const {n}))",
        f"    (if (i32.ge_u (local.get $tid) (i32.const {n})) "
        f"(then (return (i32.const {BAD_INDEX}))))",
        *_ready_checks(len(plan.inputs)),
        *sequence_body(spec, f"(i32.const {_BARRIER_AT})", ABORTED),
        f"    (if {barrier} (then (return (i32.const {ABORTED}))))",
        f"    (if (local.get $tid) (then (return (i32.const {OK}))))",
        *checks,
        f"    (i32.const {OK}))",
    ]


RUN_CHUNKS = 8
"""``run`` calls a launch with enough work as up to this many consecutive ranges. A browser
compiles a module with a baseline compiler first and optimises a function only for its
later calls (V8 has no on-stack replacement for Wasm): a launch made of one call would run
unoptimised on the first run, and a page often runs once."""


def _chunks(size: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges covering ``size`` invocations in ``parts`` (the threads' split)."""
    step = split_step(size, parts) if parts > 1 else size
    return [(lo, min(lo + step, size)) for lo in range(0, size, max(step, 1))] or [(0, 0)]


def module_text(plan: ExportedPlan) -> str:
    """The WAT of the whole-model module (with ``run_thread`` and an imported shared memory
    when ``plan.threads > 1``)."""
    messages, offsets, at = [], {}, _MESSAGES_AT
    for code, text in ERRORS.items():
        offsets[code] = at
        messages.append(f'  (data (i32.const {at}) "{_wat_string(text)}\\00")')
        at += len(text.encode()) + 1
    assert at <= _BASE, "error messages overflow their region"
    calls = [
        f"    (call $k{k} (i32.const {lo}) (i32.const {hi}) (i32.const {out}) "
        + " ".join(f"(i32.const {a})" for a in ins) + ")"
        for (k, n, out, ins), program in zip(plan.calls, plan.programs, strict=True)
        for lo, hi in _chunks(n, program.parts(RUN_CHUNKS))
    ]
    checks = [  # an index check's counts are per block of indices: any nonzero
        f"    (if (call $any_nonzero (i32.const {at}) (i32.const {n})) "
        f"(then (return (i32.const {INDEX_OUT_OF_RANGE}))))"
        for at, n in plan.counts
    ]
    code_table = "".join(
        f"    (if (i32.eq (local.get $code) (i32.const {c})) (then (return (i32.const {o}))))\n"
        for c, o in offsets.items()
    )
    if plan.threads > 1:
        memory = [f'  (import "env" "memory" (memory {plan.pages} {plan.pages} shared))',
                  '  (export "memory" (memory 0))']  # fmt: skip
    else:
        memory = [f'  (memory (export "memory") {plan.pages} {plan.pages})']
    return "\n".join([
        f";; spawnml export-wasm, ABI {ABI_VERSION}",
        "(module",
        *memory,
        *messages,
        *link(plan.kernels),
        f'  (func (export "abi_version") (result i32) (i32.const {ABI_VERSION}))',
        f'  (func (export "weights_ptr") (result i32) (i32.const {_BASE}))',
        f'  (func (export "weights_size") (result i32) (i32.const {len(plan.weights)}))',
        *_load_function(_BASE, plan.weights),
        f'  (func (export "input_count") (result i32) (i32.const {len(plan.inputs)}))',
        _table("input_ptr", [t.address for t in plan.inputs]),
        _table("input_size", [t.nbytes for t in plan.inputs]),
        *_set_input_function(len(plan.inputs)),
        f'  (func (export "output_count") (result i32) (i32.const {len(plan.outputs)}))',
        _table("output_ptr", [t.address for t in plan.outputs]),
        _table("output_size", [t.nbytes for t in plan.outputs]),
        '  (func (export "run") (result i32)',
        *_ready_checks(len(plan.inputs)),
        *calls,
        *checks,
        f"    (i32.const {OK}))",
        *(_thread_functions(plan, checks) if plan.threads > 1 else []),
        "  (func $any_nonzero (param $p i32) (param $n i32) (result i32)",
        "    (local $end i32)",
        "    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $n) (i32.const 2))))",
        "    (block $done (loop $each",
        "      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))",
        "      (if (i32.load (local.get $p)) (then (return (i32.const 1))))",
        "      (local.set $p (i32.add (local.get $p) (i32.const 4)))",
        "      (br $each)))",
        "    (i32.const 0))",
        '  (func (export "error_message") (param $code i32) (result i32)',
        code_table + f"    (i32.const {offsets[7]}))",
        ")",
    ]) + "\n"


def _signed(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def record(
    model: Any, shapes: dict[str, tuple[int, ...]] | None = None, threads: int = 1
) -> ExportedPlan:
    """Plan and record ``model`` (a path, bytes or ModelProto) on a one-thread wasm backend
    and lay its launches out for one module run by ``threads`` threads."""
    if not 1 <= threads <= 64:
        raise InvalidInputError(f"threads must be between 1 and 64, got {threads}")
    from .backend import WasmBackend

    backend = WasmBackend(threads=1)
    try:
        plan = _layout(record_model(model, backend, shapes))
        plan.threads = threads
        plan.parts = [p.parts(threads) for p in plan.programs]
        return plan
    finally:
        backend.close()


def _layout(rec: RecordedModel) -> ExportedPlan:
    """Addresses for the recorded buffers: the weights from ``_BASE`` (one block, the bytes
    the host writes), then the inputs, the outputs and the rest, each 16-byte aligned."""
    out = ExportedPlan()
    addresses: dict[int, int] = {}
    weights = bytearray()
    for n, buffer in enumerate(rec.buffers):
        if buffer.kind == "weight":
            assert buffer.data is not None
            addresses[n] = _BASE + len(weights)
            weights += buffer.data + bytes(_align(len(buffer.data)) - len(buffer.data))
    out.weights = bytes(weights)
    at = _BASE + len(weights)

    def place(n: int) -> int:
        nonlocal at
        if n not in addresses:
            addresses[n] = at
            at += _align(max(rec.buffers[n].nbytes, 4))
        return addresses[n]

    for kind, tensors in (("inputs", rec.inputs), ("outputs", rec.outputs)):
        getattr(out, kind).extend(
            _Tensor(t.name, t.storage.name, t.shape, t.nbytes, place(t.buffer), t.dtype.name)
            for t in tensors)
    if len(out.inputs) > MAX_INPUTS:
        raise ExportError(f"the model has {len(out.inputs)} inputs; a module takes at most "
                          f"{MAX_INPUTS}")  # fmt: skip
    kernels: dict[str, int] = {}
    for launch in rec.launches:
        program = launch.program
        if program.key not in kernels:
            kernels[program.key] = len(out.kernels)
            out.kernels.append(WatKernel.parse(program.source))
        out.programs.append(program)
        out.calls.append((kernels[program.key], program.size, place(launch.out),
                          [place(r) for r in launch.ins]))  # fmt: skip
    out.counts = [(place(c.buffer), c.size) for c in rec.checks]
    out.end = at + SLACK  # strided vector loads read up to 16 bytes past a buffer
    return out


def export_wasm(
    model: Any,
    directory: str | Path,
    shapes: dict[str, tuple[int, ...]] | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Write ``model.wasm``, ``model.weights``, ``model.json`` and the runners into
    ``directory``; returns the manifest. ``threads > 1`` writes a module for that many
    threads on a shared memory (hosts with the Wasm threads proposal: node, cross-origin
    isolated pages)."""
    start = time.perf_counter()
    return write_module(record(model, shapes, threads), Path(directory), start)


def assemble(plan: ExportedPlan) -> bytes:
    """The binary module of ``plan`` (``module_text`` assembled)."""
    import wasmtime

    try:
        return bytes(wasmtime.wat2wasm(module_text(plan)))
    except wasmtime.WasmtimeError as exc:
        raise ExportError(f"the whole-model module does not assemble: {exc}") from None


def write_module(plan: ExportedPlan, directory: Path, start: float | None = None
                 ) -> dict[str, Any]:
    """Write the module of ``plan``, its weights, manifest and runners into ``directory``;
    returns the manifest (``start``: when the export began, for its time)."""
    import wasmtime

    start = time.perf_counter() if start is None else start
    threads = plan.threads
    binary = assemble(plan)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.wasm").write_bytes(binary)
    (directory / "model.weights").write_bytes(plan.weights)
    from .wasi_runner import file_name, runner_text

    wasi = None
    if threads == 1:  # the WASI runner has no threads (wasi-threads is not used)
        runner = wasmtime.wat2wasm(runner_text([t.name for t in plan.inputs],
                                               [t.name for t in plan.outputs]))
        (directory / "wasi-run.wasm").write_bytes(runner)
        wasi = {"module": "wasi-run.wasm", "module_bytes": len(runner),
                "inputs": [file_name(t.name) for t in plan.inputs],
                "outputs": [file_name(t.name) for t in plan.outputs]}
    manifest = {
        "format": "spawnml-wasm",
        "abi": ABI_VERSION,
        "module": "model.wasm",
        "module_bytes": len(binary),
        "weights": weights_manifest(plan.weights, "model.weights"),
        "memory_bytes": plan.pages * PAGE,
        "kernels": len(plan.kernels),
        "launches": len(plan.calls),
        "inputs": [t.manifest() for t in plan.inputs],
        "outputs": [t.manifest() for t in plan.outputs],
        "threads": threads,
        "split_launches": sum(p > 1 for p in plan.parts),
        "export_seconds": round(time.perf_counter() - start, 3),
    }
    if wasi is not None:
        manifest["wasi"] = wasi
    (directory / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name in ("spawnml-model.mjs", "spawnml-worker.mjs", "run.mjs"):
        shutil.copyfile(_RUNTIME / name, directory / name)
    return manifest
