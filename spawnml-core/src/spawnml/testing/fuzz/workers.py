"""Run cases in worker processes, so that an abort or a hang is counted instead of fatal.

A worker (``spawn`` context by default) imports spawnml and the oracles once, then judges
one task at a time, telling the parent which stage it is in (``spawnml``, ``onnxruntime``,
``reference``). A worker that dies is a ``crash`` (an ``oracle-failure`` when it died inside
an oracle); one that passes the per-case timeout is killed, a ``hang``. Either way it is
replaced. ``faulthandler`` writes each worker's Python stack to a file on a fatal signal (and
on SIGUSR1, sent before a hung worker is killed), which names the innermost spawnml frame of
crashes and hangs. Workers run in an empty folder (relative external-data paths find
nothing) with a data-segment limit, so a model that asks for terabytes fails in the worker.
"""

from __future__ import annotations

import faulthandler
import logging
import multiprocessing
import os
import re
import signal
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from .cases import Case
from .oracle import CRASH, HANG, ORACLE_FAILURE, Outcome, SpawnRunner, judge

DEFAULT_TIMEOUT = 20.0
DEFAULT_MEMORY_MB = 4096
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_OWN = re.compile(r"[\\/](spawnml(?:_[a-z0-9_]+)?)[\\/]")


@dataclass
class Task:
    """One case for one backend; ``runner`` replaces ``oracle.run_spawnml`` (tests use the
    deliberately broken runners of ``faults``). It must be picklable: a module-level
    function."""

    case: Case
    backend: str
    runner: SpawnRunner | None = None


# -- the worker process -----------------------------------------------------------------------
def _limit_resources(memory_mb: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _quiet() -> None:
    """Silence the worker: logging, warnings, onnxruntime's logger, and fds 1 and 2."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    try:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)
    except ImportError:  # pragma: no cover - onnxruntime is a test dependency
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)


def worker_main(conn: Connection, fault_path: str, workdir: str, memory_mb: int,
                quiet: bool) -> None:
    """The worker loop: receive a Task (None stops), send ("stage", name) messages, then
    ("done", Outcome)."""
    fault = open(fault_path, "w")
    faulthandler.enable(file=fault, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=fault, all_threads=True, chain=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers on Ctrl-C
    os.chdir(workdir)
    _limit_resources(memory_mb)
    import onnx.reference  # noqa: F401 - warm the imports before the first timed case
    import onnxruntime  # noqa: F401

    import spawnml  # noqa: F401

    if quiet:
        _quiet()
    conn.send(("ready", os.getpid()))
    while True:
        task = conn.recv()
        if task is None:
            return
        fault.seek(0)
        fault.truncate()
        try:
            outcome = judge(task.case, task.backend, task.runner or _default_runner(),
                            stage=lambda name: conn.send(("stage", name)))
        except BaseException as exc:  # noqa: BLE001 - a fuzzer bug: reported, never fatal
            outcome = Outcome(task.case.kind, task.case.seed, task.backend, ORACLE_FAILURE,
                              error_type=type(exc).__name__, message=str(exc)[:300],
                              stage="judge", detail=traceback.format_exc()[-2000:],
                              label=task.case.label)
        conn.send(("done", outcome))


def _default_runner() -> SpawnRunner:
    from .oracle import run_spawnml

    return run_spawnml


# -- the parent side --------------------------------------------------------------------------
def fault_frame(text: str) -> str:
    """``package/path.py:line`` of the innermost spawnml frame of the thread that runs the
    case in a faulthandler dump (most recent call first), or of its innermost frame."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    block = next((b for b in blocks if "fuzz/workers.py" in b.replace("\\", "/")), text)
    frames = _FRAME.findall(block)
    for path, line in frames:
        match = _OWN.search(path)
        if match and "testing/fuzz/" not in path.replace("\\", "/"):
            return f"{path[match.start() + 1:]}:{line}"
    if frames:
        path, line = frames[0]
        return f"{'/'.join(path.replace(chr(92), '/').split('/')[-2:])}:{line}"
    return "?"


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


class _Worker:
    def __init__(self, ctx: Any, folder: Path, index: int, memory_mb: int, quiet: bool,
                 startup_timeout: float) -> None:
        self.fault_path = folder / f"worker-{index}.fault"
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=worker_main, daemon=True,
            args=(child, str(self.fault_path), str(folder / "cwd"), memory_mb, quiet))
        self.process.start()
        child.close()
        self.task: Task | None = None
        self.stage = ""
        self.deadline = 0.0
        self.started = 0.0
        if not self.conn.poll(startup_timeout):
            self.kill()
            raise RuntimeError(f"fuzz worker did not start in {startup_timeout:.0f} s")
        try:
            self.conn.recv()
        except EOFError as exc:
            raise RuntimeError(f"fuzz worker died while starting "
                               f"({_signal_name(self.process.exitcode)})") from exc

    def send(self, task: Task, timeout: float) -> None:
        self.task, self.stage = task, "sent"
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        self.conn.send(task)

    def fault_text(self) -> str:
        try:
            return self.fault_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """A few worker processes (default 1) that judge tasks with a per-case ``timeout``."""

    def __init__(self, workers: int = 1, timeout: float = DEFAULT_TIMEOUT,
                 memory_mb: int = DEFAULT_MEMORY_MB, context: str = "spawn",
                 quiet: bool = True, startup_timeout: float = 180.0) -> None:
        self.size = max(1, workers)
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.quiet = quiet
        self.startup_timeout = startup_timeout
        self._ctx = multiprocessing.get_context(context)
        self._dir = tempfile.TemporaryDirectory(prefix="spawnml-fuzz-")
        self._folder = Path(self._dir.name)
        (self._folder / "cwd").mkdir()
        self._made = 0
        self._workers: list[_Worker] = []
        self.replaced = 0

    def _new_worker(self) -> _Worker:
        self._made += 1
        return _Worker(self._ctx, self._folder, self._made, self.memory_mb, self.quiet,
                       self.startup_timeout)

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        """Judge every task; outcomes come in the order they finish."""
        pending = iter(tasks)
        exhausted = False
        while True:
            while not exhausted and (len(self._workers) < self.size or any(
                    w.task is None for w in self._workers)):
                task = next(pending, None)
                if task is None:
                    exhausted = True
                    break
                idle = next((w for w in self._workers if w.task is None), None)
                if idle is None:
                    idle = self._new_worker()
                    self._workers.append(idle)
                idle.send(task, self.timeout)
            busy = [w for w in self._workers if w.task is not None]
            if not busy:
                return
            left = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=left)
            for worker in busy:
                yield from self._service(worker)

    def _service(self, worker: _Worker) -> Iterator[Outcome]:
        """Read what ``worker`` sent; yield its outcome, or a crash/hang (then replace it)."""
        try:
            while worker.conn.poll():
                what, value = worker.conn.recv()
                if what == "stage":
                    worker.stage = value
                elif what == "done":
                    worker.task = None
                    yield value
                    return
        except (EOFError, OSError):
            pass
        if not worker.process.is_alive():
            worker.process.join(1)
            yield self._lost(worker, CRASH, _signal_name(worker.process.exitcode))
        elif time.monotonic() > worker.deadline:
            os.kill(worker.process.pid, signal.SIGUSR1)  # faulthandler: where it hangs
            time.sleep(0.5)
            yield self._lost(worker, HANG, f"over {self.timeout:g} s")

    def _lost(self, worker: _Worker, cls: str, error_type: str) -> Outcome:
        task = worker.task
        assert task is not None
        seconds = round(time.monotonic() - worker.started, 3)
        text = worker.fault_text()
        worker.kill()
        self._workers.remove(worker)
        self.replaced += 1
        in_spawnml = worker.stage in ("spawnml", "sent", "localize")
        return Outcome(
            task.case.kind, task.case.seed, task.backend, cls if in_spawnml else ORACLE_FAILURE,
            error_type=error_type if in_spawnml else f"{cls} {error_type}",
            message=f"worker {cls} during {worker.stage}", where=fault_frame(text),
            detail=text[-3000:], label=task.case.label, stage=worker.stage, seconds=seconds)

    def close(self) -> None:
        """Stop every worker and remove the pool's folder."""
        for worker in self._workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
            worker.process.join(2)
            worker.kill()
        self._workers.clear()
        self._dir.cleanup()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
