"""``spawnml batch``'s engine: a pipeline task over a folder (or a list) of images on Ray Data.

Results go to ``OUTPUT/results/part-*.parquet`` (one file per block, written atomically:
a temporary file renamed into place) and images to ``OUTPUT/<input's relative path>.png``
(written before the part that names them). A rerun skips every input that already has a
row, so an interrupted job resumes where it stopped. An image that cannot be processed gets
an ``error`` entry; a worker that dies is restarted by Ray and its block retried, and an
image on which workers died ``task_retries`` times gets an error entry instead of another
try (``PipelinePredictor``'s attempt count); if Ray itself loses the work (a node, an
object), what is left runs again, and what still cannot finish is recorded as errors, so
the job always ends with a row for every input.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError, SpawnMLError
from spawnml.hub import ProgressBar

from .predictors import TEST_HOOKS, BackendRef, PipelinePredictor
from .shipping import ShippedModel, Via, ship_model
from .tasks import FILE_PREFIX, task_output

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})
RESULTS = "results"


class BatchError(SpawnMLError):
    """The batch job cannot run (bad arguments, no cluster, a model every actor fails on)."""


@dataclass
class BatchReport:
    """What a batch run did: counts, time, throughput and where its results are."""

    total: int
    skipped: int  # already done by an earlier run
    done: int = 0
    errors: int = 0
    seconds: float = 0.0
    actors: int = 1
    backends: list[str] = field(default_factory=list)
    output: Path | None = None

    def add(self, rows: int, errors: int, backends: Iterable[str | None]) -> None:
        self.done += rows
        self.errors += errors
        self.backends.extend(b for b in dict.fromkeys(backends) if b and b not in self.backends)

    @property
    def images_per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        return (f"{self.done} processed ({self.errors} errors), {self.skipped} already done, "
                f"of {self.total} in {self.seconds:.1f} s with {self.actors} actor(s) on "
                f"{', '.join(self.backends) or '-'}: {self.images_per_second:.2f} images/s")


@dataclass(frozen=True)
class Item:
    path: str  # as given (absolute)
    name: str  # the output name: the path relative to the input root, without suffix


def list_inputs(source: str | os.PathLike) -> list[Item]:
    """The images of a folder (recursively, sorted), or the ``path`` column of a Parquet or
    CSV file (relative paths are taken from the file's folder)."""
    root = Path(source)
    if root.is_dir():
        paths = sorted(p for p in root.rglob("*")
                       if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        return _items(paths, root)
    if not root.is_file():
        raise InvalidInputError(f"input {root}: no such folder or file")
    if root.suffix.lower() not in (".parquet", ".csv"):
        raise InvalidInputError(
            f"input {root}: expected a folder of images, a .parquet or a .csv with a 'path' "
            "column")
    table = _read_table(root)
    if "path" not in table.column_names:
        raise InvalidInputError(f"input {root}: no 'path' column (columns: {table.column_names})")
    texts = [t for t in table.column("path").to_pylist() if t]
    return _items([Path(t) if Path(t).is_absolute() else root.parent / t for t in texts],
                  root.parent)


def _items(paths: Sequence[Path], root: Path) -> list[Item]:
    """Items named by their path relative to ``root`` without its suffix (with it, as
    ``name_png``, where two images would share a name); one outside ``root`` is named by a
    digest of its full path, so two images never share an output name."""
    import hashlib
    from collections import Counter

    items: list[Item] = []
    base = root.resolve()
    for path in paths:
        full = path.resolve()
        try:
            name = str(full.relative_to(base).with_suffix(""))
        except ValueError:
            digest = hashlib.sha1(str(full).encode()).hexdigest()[:10]
            name = f"_external/{digest}-{full.stem}"
        items.append(Item(str(full), name))
    clashes = Counter(it.name for it in items)
    return [Item(it.path, f"{it.name}_{Path(it.path).suffix.lstrip('.').lower()}")
            if clashes[it.name] > 1 else it for it in items]


def _read_table(path: Path) -> Any:
    import pyarrow.csv
    import pyarrow.parquet

    try:
        if path.suffix.lower() == ".csv":
            return pyarrow.csv.read_csv(path)
        return pyarrow.parquet.read_table(path)
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise InvalidInputError(f"input {path}: cannot read it: {exc}") from exc


def read_results(output: str | os.PathLike) -> Any:
    """Every result row written so far under ``output`` (a pyarrow Table), the newest row
    per input path when a rerun retried it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted((Path(output) / RESULTS).glob("part-*.parquet"))
    if not parts:
        return pa.table({"path": pa.array([], pa.string())})
    table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default")
    latest: dict[str, int] = {}
    for i, path in enumerate(table.column("path").to_pylist()):
        latest[path] = i
    return table.take(sorted(latest.values()))


def _done_paths(output: Path, retry_errors: bool) -> set[str]:
    table = read_results(output)
    if table.num_rows == 0:
        return set()
    paths = table.column("path").to_pylist()
    if not retry_errors or "error" not in table.column_names:
        return set(paths)
    errors = table.column("error").to_pylist()
    return {p for p, e in zip(paths, errors) if not e}


class _Writer:
    """Writes a block's images, then its Parquet part, each atomically."""

    def __init__(self, output: Path, names: dict[str, str]) -> None:
        self.output = output
        self.names = names  # input path -> output name
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.parts = 0
        (output / RESULTS).mkdir(parents=True, exist_ok=True)

    def write(self, columns: dict[str, list[Any]]) -> tuple[int, int]:
        """Write one block; returns (rows, rows with an error)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        paths = columns["path"]
        for key in [k for k in columns if k.startswith(FILE_PREFIX)]:
            suffix = key[len(FILE_PREFIX):]
            written: list[str | None] = []
            for path, data in zip(paths, columns.pop(key)):
                if data is None:
                    written.append(None)
                    continue
                rel = self.names[path] + suffix
                _atomic_write(self.output / rel, bytes(data))
                written.append(rel)
            columns["output" + suffix.replace(".", "_").removesuffix("_png")] = written
        self.parts += 1
        target = self.output / RESULTS / f"part-{self.run_id}-{self.parts:05d}.parquet"
        fd, tmp = tempfile.mkstemp(prefix=".part-", dir=target.parent)
        os.close(fd)
        try:
            pq.write_table(pa.table(columns), tmp)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        errors = sum(1 for e in columns.get("error", []) if e)
        return len(paths), errors


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """Initialise Ray: ``None``/``"local"`` starts a local cluster (``num_cpus`` CPUs),
    ``"auto"`` or ``ray://host:port`` joins one. Returns whether this call started Ray (so
    the caller shuts it down); an already initialised Ray is used as it is."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
    try:
        if address in (None, "local"):
            ray.init(address="local", num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except Exception as exc:  # ray raises ConnectionError, RuntimeError...
        hint = (" (a cluster with token authentication needs RAY_AUTH_MODE=token and its "
                "token here)" if str(address).startswith("ray://") else "")
        raise BatchError(
            f"cannot start or reach Ray at {address or 'local'}: {exc}{hint}") from exc
    return True


def run_batch(
    task: str,
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    backend: BackendRef = None,
    actors: int = 1,
    batch_size: int = 8,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    address: str | None = None,
    ship: Via = "object-store",
    options: dict[str, Any] | None = None,
    retry_errors: bool = False,
    task_retries: int = 3,
    cluster_cpus: int | None = None,
    progress: bool | None = None,
) -> BatchReport:
    """Run pipeline ``task`` over ``inputs`` (a folder, a Parquet/CSV with a ``path``
    column, or a list of image paths) with ``actors`` Ray actors, each holding one pipeline
    on the backend its node offers (``backend``: a name or preference list), and write the
    results under ``output``. Inputs with a row from an earlier run are skipped (with
    ``retry_errors``, those with an error are run again). ``address``: see :func:`connect`
    (``cluster_cpus`` sizes a local cluster)."""
    import ray

    output = Path(output)
    if actors < 1 or batch_size < 1:
        raise InvalidInputError(f"actors and batch_size must be >= 1, got {actors}, {batch_size}")
    task_output(task)  # an unknown task fails here, before any cluster starts
    if isinstance(inputs, (str, os.PathLike)):
        items = list_inputs(inputs)
    else:
        paths = [Path(p) for p in inputs]
        root = Path(os.path.commonpath([p.resolve().parent for p in paths])) if paths else Path()
        items = _items(paths, root)
    if not items:
        raise InvalidInputError(f"no images found in {inputs}")
    done = _done_paths(output, retry_errors)
    todo = [it for it in items if it.path not in done]
    report = BatchReport(total=len(items), skipped=len(items) - len(todo), actors=actors,
                         output=output)
    if not todo:
        return report
    started = connect(address, num_cpus=cluster_cpus)
    try:
        shipped = _ship(task, model, ship)
        writer = _Writer(output, {it.path: it.name for it in items})
        start = time.perf_counter()
        job = uuid.uuid4().hex
        with ProgressBar(len(todo), f"{task} batch", unit="image", enabled=progress) as bar, \
                _quiet_ray_logs():
            failed_passes = stalled = 0
            while remaining := [it for it in todo if it.path not in done]:
                before = len(done)
                try:
                    for columns in _passes(task, shipped, backend, remaining, actors,
                                           batch_size, num_cpus, num_gpus, options,
                                           (job, task_retries)):
                        rows, errors = writer.write(columns)
                        done.update(columns["path"])
                        report.add(rows, errors, columns.get("backend", []))
                        bar.update(rows)
                except ray.exceptions.RayError as exc:
                    cause = _startup_error(exc)
                    if cause is not None:
                        raise BatchError(f"the {task} actors cannot start: {cause}") from exc
                    failed_passes += 1  # a lost node or object: run what is left again
                    stalled = stalled + 1 if len(done) == before else 0
                    if stalled > 1 or failed_passes > task_retries:
                        reason = str(exc).strip().splitlines()[0]
                        left = [it for it in remaining if it.path not in done]
                        rows, errors = writer.write(_lost(left, done, reason))
                        report.add(rows, errors, [])
                        bar.update(rows)
        report.seconds = time.perf_counter() - start
    finally:
        if started:
            ray.shutdown()
    return report


def _ship(task: str, model: str | os.PathLike | None, via: Via) -> ShippedModel:
    """Resolve the task's model on the driver (generating or fetching a known name once)
    and ship it to the workers."""
    from spawnml_pipelines import ALIASES
    from spawnml_pipelines.models import resolve_model
    from spawnml_pipelines.plugin import registered_pipelines

    cls = registered_pipelines()[ALIASES.get(task, task)]
    return ship_model(resolve_model(model or cls.default_model), via=via)


def _execute(task: str, shipped: ShippedModel, backend: BackendRef, items: list[Item],
             actors: int, batch_size: int, num_cpus: float, num_gpus: float,
             options: dict[str, Any] | None, attempts: tuple[str, int]
             ) -> Iterable[dict[str, list[Any]]]:
    """Stream the result blocks of one pass over ``items``."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    blocks = max(1, min(len(items), (len(items) + batch_size - 1) // batch_size))
    ds = ray.data.from_items([{"path": it.path} for it in items], override_num_blocks=blocks)
    ds = ds.map_batches(
        PipelinePredictor,
        fn_constructor_kwargs={"task": task, "model": shipped, "backend": backend,
                               "options": options, "attempts": attempts},
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        batch_format="numpy",
        **_test_hooks(),
    )
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield batch.to_pydict()


def _passes(*args: Any) -> Iterable[dict[str, list[Any]]]:
    """:func:`_execute` here, or on the cluster when this driver is a Ray Client (which
    cannot iterate a Dataset itself): a coordinator actor runs the pass there and hands the
    result blocks back as they come."""
    import ray

    if not ray.util.client.ray.is_connected():
        yield from _execute(*args)
        return
    coordinator = ray.remote(num_cpus=0)(_Coordinator).remote(*args)
    try:
        while (blocks := ray.get(coordinator.take.remote())) is not None:
            yield from blocks
    finally:
        ray.kill(coordinator)


_RUNNING = object()


class _Coordinator:
    """Runs one pass of :func:`_execute` on the cluster in a thread; ``take`` returns the
    result blocks finished since the last call (waiting for at least one), None at the end,
    and raises the pass's error."""

    def __init__(self, *args: Any) -> None:
        import queue
        import threading

        self.queue: queue.Queue = queue.Queue()
        self.end: Any = _RUNNING  # then None (finished) or the pass's exception
        threading.Thread(target=self._run, args=args, daemon=True).start()

    def _run(self, *args: Any) -> None:
        try:
            for block in _execute(*args):
                self.queue.put(block)
        except BaseException as exc:  # noqa: BLE001 - handed to the driver by take()
            self.queue.put(exc)
        else:
            self.queue.put(None)

    def take(self, most: int = 64) -> list[dict[str, list[Any]]] | None:
        blocks: list[dict[str, list[Any]]] = []
        while len(blocks) < most and self.end is _RUNNING and (
                not blocks or not self.queue.empty()):
            item = self.queue.get()
            if item is None or isinstance(item, BaseException):
                self.end = item
            else:
                blocks.append(item)
        if blocks:
            return blocks
        if isinstance(self.end, BaseException):
            raise self.end
        return None


def _test_hooks() -> dict[str, Any]:
    """The test hooks set in the driver's environment, forwarded to the actors."""
    env = {k: os.environ[k] for k in TEST_HOOKS if k in os.environ}
    return {"runtime_env": {"env_vars": env}} if env else {}


def _startup_error(exc: BaseException) -> str | None:
    """The error that kept the predictor's constructor from running (a model or backend
    problem retrying cannot fix), or None for any other Ray failure."""
    text = str(exc)
    if "creation task" not in text:
        return None
    lines = [line.strip() for line in text.splitlines() if "Error: " in line]
    if not lines:
        return text.strip().splitlines()[0]
    return lines[-1].removeprefix("spawnml.errors.")


@contextlib.contextmanager
def _quiet_ray_logs() -> Iterator[None]:
    """Ray Data logs every failure with its traceback; the job reports them itself."""
    import ray.data  # noqa: F401 - Ray Data configures its loggers on import

    loggers = [logging.getLogger(name) for name in ("ray.data", "ray")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _lost(items: list[Item], done: set[str], reason: str) -> dict[str, list[Any]]:
    """Error rows for items no worker could finish."""
    paths = [it.path for it in items]
    done.update(paths)
    return {"path": paths, "backend": [None] * len(paths),
            "error": [f"WorkerLost: {reason}"] * len(paths)}
