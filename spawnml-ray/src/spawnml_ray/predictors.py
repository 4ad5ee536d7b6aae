"""Callable classes for ``ray.data.Dataset.map_batches``: one spawnml session (or pipeline)
per actor, opened once in the constructor and reused for every batch.

    ds.map_batches(SessionPredictor, fn_constructor_kwargs={"model": shipped},
                   compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1)

Each actor picks its backends from what *its* node has (``backend=None``: every available
one in spawnml's preference order; a name or a list: the first of them available there).
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spawnml import hub
from spawnml.errors import BackendUnavailableError, InvalidInputError
from spawnml.registry import get_available_backends

from .shipping import ShippedModel
from .tasks import task_output

BackendRef = str | Sequence[str] | None
ModelRef = ShippedModel | str | os.PathLike | None
KILL_ENV = "SPAWNML_RAY_TEST_KILL"
"""Test hook, ``MARKER:N``: the first actor to finish N items creates MARKER and exits
without returning its batch, as a worker that dies mid-job would (at most once per MARKER)."""
POISON_ENV = "SPAWNML_RAY_TEST_POISON"
"""Test hook, a substring: an actor processing an image whose path contains it exits at
once, every time (an image that crashes the native code under it)."""
TEST_HOOKS = (KILL_ENV, POISON_ENV)
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # which process ran a row


def node_backends(backend: BackendRef) -> list[str]:
    """The backends to use on this node: every available one for None/"auto", else the
    named ones (a list, or a comma-separated string) that are available here, in order."""
    available = get_available_backends()
    if backend is None or backend == "auto":
        wanted = available
    else:
        names = backend.split(",") if isinstance(backend, str) else list(backend)
        wanted = [n.strip() for n in names if n.strip() in available]
        if not wanted:
            raise BackendUnavailableError(
                f"none of the backends {', '.join(names)} is available on node "
                f"{socket.gethostname()} (available there: {', '.join(available) or 'none'})")
    if not wanted:
        raise BackendUnavailableError(f"no spawnml backend is available on {socket.gethostname()}")
    return wanted


def model_path(model: ModelRef) -> Path | str | None:
    """A shipped model as a local file; paths and names are passed through."""
    if isinstance(model, ShippedModel):
        return model.local_path()
    return model


class _KillHook:
    """The :data:`KILL_ENV` test hook of one actor."""

    def __init__(self) -> None:
        spec = os.environ.get(KILL_ENV, "")
        marker, _, after = spec.rpartition(":")
        self.marker = marker or None
        self.after = int(after) if marker else 0
        self.items = 0

    def tick(self, n: int) -> None:
        if self.marker is None:
            return
        self.items += n
        if self.items < self.after:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            self.marker = None
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(1)  # die like a killed worker: no cleanup, no result


class _Attempts:
    """How often this node started each image: a marker file per image in the node's
    spawnml cache, grown before the image is processed and removed once it is done, so it
    counts the workers that died on it, across actor restarts."""

    def __init__(self, spec: tuple[str, int] | None) -> None:
        self.folder: Path | None = None
        self.limit = 0
        if spec is not None:
            job, self.limit = spec
            self.folder = hub.cache_dir() / "ray" / "attempts" / job
            self.folder.mkdir(parents=True, exist_ok=True)

    def _marker(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / hashlib.sha1(key.encode()).hexdigest()

    def begin(self, key: str) -> int:
        """Count one more start of ``key``; returns how many earlier starts died."""
        if self.folder is None:
            return 0
        with open(self._marker(key), "ab") as f:
            f.write(b".")
            return f.tell() - 1

    def end(self, key: str) -> None:
        if self.folder is not None:
            self._marker(key).unlink(missing_ok=True)


class SessionPredictor:
    """Runs an ONNX model on each batch: the model's inputs are the batch columns of the
    same names (all of them for a one-input model may come from a column named by
    ``input_column``), and every model output becomes a column.

    A model whose first input dimension is symbolic takes the whole batch in one run; one
    with a fixed batch size is run on slices of that size and the outputs concatenated."""

    def __init__(self, model: ModelRef, backend: BackendRef = None, *,
                 outputs: Sequence[str] | None = None,
                 input_column: str | None = None) -> None:
        from spawnml import InferenceSession

        path = model_path(model)
        if path is None:
            raise InvalidInputError("SessionPredictor needs a model")
        self.backends = node_backends(backend)
        self.session = InferenceSession(str(path), backends=self.backends)
        self.inputs = self.session.get_inputs()
        self.outputs = list(outputs) if outputs else [o.name for o in self.session.get_outputs()]
        if input_column is not None and len(self.inputs) != 1:
            raise InvalidInputError(
                f"input_column={input_column!r} needs a one-input model; this one has "
                f"{[i.name for i in self.inputs]}")
        self.columns = {i.name: input_column or i.name for i in self.inputs}
        first = self.inputs[0].shape[0] if self.inputs and self.inputs[0].shape else None
        self.fixed_batch = first if isinstance(first, int) and first > 0 else None
        self._kill = _KillHook()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [c for c in self.columns.values() if c not in batch]
        if missing:
            raise InvalidInputError(
                f"batch has no column {missing[0]!r} for the model's input (columns: "
                f"{sorted(batch)})")
        feeds = {name: _stacked(batch[col]) for name, col in self.columns.items()}
        rows = len(next(iter(feeds.values())))
        step = self.fixed_batch or rows
        parts = [self.session.run(self.outputs, {n: f[i:i + step] for n, f in feeds.items()})
                 for i in range(0, rows, step)]
        self._kill.tick(rows)
        return {name: np.concatenate([p[k] for p in parts]) for k, name in
                enumerate(self.outputs)}


def _stacked(column: np.ndarray) -> np.ndarray:
    """A batch column as one array (Ray hands equal-shaped tensors as an object array when
    they come from Python lists)."""
    if column.dtype == object:
        return np.stack([np.asarray(v) for v in column])
    return column


class PipelinePredictor:
    """Runs a spawnml-pipelines task on each image of a batch, whatever their sizes: each is
    decoded and pre-processed by the pipeline's own kernels on the actor's device.

    Images come from a ``path`` column (files the workers can read), a ``bytes`` column
    (encoded files, as ``ray.data.read_binary_files`` gives) or an ``image`` column (HWC
    uint8 arrays, as ``ray.data.read_images`` gives). Each row gets the task's columns
    (see :mod:`spawnml_ray.tasks`), the ``backend`` that ran it and an ``error`` column: an
    image that cannot be read or processed is recorded there and the batch goes on."""

    def __init__(self, task: str, model: ModelRef = None, backend: BackendRef = None, *,
                 options: dict[str, Any] | None = None,
                 pipeline_options: dict[str, Any] | None = None,
                 attempts: tuple[str, int] | None = None) -> None:
        from spawnml_pipelines import pipeline

        self.output = task_output(task)
        self.options = dict(options or {})
        self.backends = node_backends(backend)
        self.pipe = pipeline(task, model=model_path(model), backend=self.backends,
                             progress=False, **(pipeline_options or {}))
        self._kill = _KillHook()
        self._attempts = _Attempts(attempts)
        self._poison = os.environ.get(POISON_ENV) or None

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sources = _image_sources(batch)
        rows = [self._row(source) for source in sources]
        self._kill.tick(len(rows))
        columns: dict[str, Any] = {key: [r[key] for r in rows] for key in rows[0]} if rows \
            else {key: [] for key in [*self.output.empty, "backend", "worker", "error"]}
        out = {key: _column(values) for key, values in columns.items()}
        for key, value in batch.items():  # pass the inputs' own columns through
            if key not in ("bytes", "image") and key not in out:
                out[key] = value
        return out

    def _row(self, source: Any) -> dict[str, Any]:
        from spawnml_pipelines.image_io import load_image

        key = _source_key(source)
        died = self._attempts.begin(key)
        row = dict(self.output.empty)
        if died and died >= self._attempts.limit:
            error = f"WorkerDied: {died} workers died processing this image"
        else:
            if self._poison is not None and self._poison in key:
                os._exit(1)
            try:
                image = load_image(_decode(source))
                row = self.output.run(self.pipe, image, self.options)
                error = ""
            except Exception as exc:  # noqa: BLE001 - one bad image must not fail the batch
                error = f"{type(exc).__name__}: {exc}"
        self._attempts.end(key)
        return {**row, "backend": self.pipe.backend, "worker": WORKER, "error": error}


def _image_sources(batch: dict[str, np.ndarray]) -> list[Any]:
    for key in ("image", "bytes", "path"):
        if key in batch:
            return list(batch[key])
    raise InvalidInputError(
        f"a pipeline batch needs an 'image', 'bytes' or 'path' column (columns: {sorted(batch)})")


def _source_key(source: Any) -> str:
    """An image's identity for attempt counting: its path, else a digest of its data."""
    if isinstance(source, (str, np.str_, os.PathLike)):
        return os.fspath(source)
    data = bytes(source) if isinstance(source, (bytes, bytearray, memoryview)) \
        else np.ascontiguousarray(source).tobytes()
    return "sha1:" + hashlib.sha1(data).hexdigest()


def _decode(source: Any) -> Any:
    """A path, an encoded file or an array, as ``load_image`` takes them."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        import io

        from PIL import Image, UnidentifiedImageError

        try:
            return Image.open(io.BytesIO(bytes(source)))
        except (UnidentifiedImageError, OSError) as exc:
            raise InvalidInputError(f"cannot decode image bytes: {exc}") from exc
    if isinstance(source, np.str_):
        return str(source)
    return source


def _column(values: list[Any]) -> np.ndarray:
    """A list of row values as a numpy column Ray accepts (object for bytes and None)."""
    if any(v is None or isinstance(v, (bytes, str)) for v in values):
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    return np.asarray(values)
