"""``spawnml export-web``: a model as a static site that runs its generated kernels in a
browser, one folder per backend (``spawnml.export.WebTarget``), one runtime, one page.

    OUT/index.html       a page that loads the model, runs it and shows outputs and times
    OUT/spawnml.mjs      the runtime: InferenceSession, Tensor, verified cached weights
    OUT/export.json      the backends in the export, the model's inputs and outputs
    OUT/<backend>/       model.json (the plan), model.weights, kernels, the backend runtime
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError
from spawnml.export import RecordedModel, record_model, web_targets
from spawnml_pipelines.recording import PipelineRecording

WEB = Path(__file__).parent / "web"
DEFAULT_BACKENDS = ("webgpu", "webgl", "wasm")
PAGE_TASKS = ("classify", "depth", "style", "remove-bg", "upscale")


def export_web(model: Any, directory: str | Path, backends: Sequence[str] = DEFAULT_BACKENDS,
               shapes: dict[str, tuple[int, ...]] | None = None, title: str | None = None,
               threads: int = 1, pipeline: str | None = None,
               image_size: tuple[int, int] | None = None) -> dict[str, Any]:
    """Write the site for ``model`` (a path, bytes or ModelProto) into ``directory`` for each
    of ``backends`` (registered web targets); returns ``export.json``'s content.
    ``threads > 1``: the wasm target also writes a module for that many threads (used by
    cross-origin isolated pages). ``pipeline`` (a task of ``PAGE_TASKS``):
    the site is that pipeline's page for RGB images of ``image_size`` (height, width),
    whose pre- and post-processing kernels run around the model (``model`` may be None:
    the task's default)."""
    if not 1 <= threads <= 64:
        raise InvalidInputError(f"threads must be between 1 and 64, got {threads}")
    targets = web_targets()
    if not backends:
        raise InvalidInputError("export-web needs at least one backend")
    unknown = [b for b in backends if b not in targets]
    if unknown:
        raise InvalidInputError(f"export-web: no web target named {unknown} (installed: "
                                f"{sorted(targets)})")
    if pipeline is None and model is None:
        raise InvalidInputError("export-web needs a model (or --pipeline TASK)")
    if pipeline is None and image_size is not None:
        raise InvalidInputError("--image-size is the size a pipeline page works at: "
                                "give --pipeline TASK too")  # fmt: skip
    if pipeline is not None and shapes:
        raise InvalidInputError("--shape fixes a model's inputs; a pipeline page takes "
                                "--image-size H,W instead")  # fmt: skip
    directory = Path(directory)
    recordings: dict[str, PipelineRecording] = {}
    exports: dict[str, Any] = {}
    created = not directory.exists()
    try:
        for name in dict.fromkeys(backends):  # every plan first: a failure writes nothing
            start = time.perf_counter()
            recordings[name] = _record(targets[name], model, shapes, pipeline, image_size)
            exports[name] = {"seconds": time.perf_counter() - start}
        index = _index(recordings, exports, model, title, pipeline)
        for stage in next(iter(recordings.values())).stages:
            folder = directory if stage == "main" else directory / stage
            for name, recording in recordings.items():
                start = time.perf_counter()
                plan = recording.stages[stage]
                manifest = targets[name].write(plan, folder / name, threads=threads)
                entry = {"kernels": len(plan.programs()), "launches": len(plan.launches),
                         "weights_bytes": manifest["weights"]["bytes"],
                         "seconds": round(time.perf_counter() - start, 3)}
                if stage == "main":
                    exports[name] = {**entry, "seconds": round(
                        exports[name]["seconds"] + entry["seconds"], 3)}
            stage_index = {**index, **_tensors(next(iter(recordings.values())).stages[stage])}
            if stage != "main":
                stage_index = {k: v for k, v in stage_index.items() if k != "pipeline"}
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "export.json").write_text(json.dumps(stage_index, indent=1) + "\n")
            shutil.copyfile(WEB / "spawnml.mjs", folder / "spawnml.mjs")  # the targets import it
            if stage == "main":
                index = stage_index
    except BaseException:
        if created and directory.exists():
            shutil.rmtree(directory)
        raise
    finally:
        for recording in recordings.values():  # its stages share one backend
            next(iter(recording.stages.values())).backend.close()
    page = "pipeline.html" if pipeline else "index.html"
    shutil.copyfile(WEB / page, directory / "index.html")
    shutil.copyfile(WEB / "spawnml.css", directory / "spawnml.css")
    if pipeline:
        shutil.copyfile(WEB / "pipeline.mjs", directory / "pipeline.mjs")
    return index


def _record(target: Any, model: Any, shapes: dict[str, tuple[int, ...]] | None,
            task: str | None, image_size: tuple[int, int] | None) -> PipelineRecording:
    """The plans of ``model`` (one stage) or of pipeline ``task`` on ``target``'s backend."""
    backend = target.backend()
    try:
        if task is None:
            recording = PipelineRecording("model", (0, 0))
            recording.stages["main"] = record_model(model, backend, shapes)
            return recording
        from spawnml_pipelines import pipeline
        from spawnml_pipelines.recording import record_pipeline

        if task not in PAGE_TASKS:
            raise InvalidInputError(f"--pipeline {task!r}: the pages are {', '.join(PAGE_TASKS)}")
        pipe = pipeline(task, model, backend=backend)
        size = image_size or pipe.fixed_size() or (512, 512)
        return record_pipeline(pipe, size)
    except BaseException:
        backend.close()
        raise


def _tensors(plan: RecordedModel) -> dict[str, list[dict[str, Any]]]:
    return {kind: [{"name": t.name, "dtype": t.dtype.name, "shape": list(t.shape)}
                   for t in getattr(plan, kind)] for kind in ("inputs", "outputs")}


def _index(recordings: dict[str, PipelineRecording], exports: dict[str, Any], model: Any,
           title: str | None, task: str | None) -> dict[str, Any]:
    """``export.json``: the backends, the tensors and, for a pipeline page, its task."""
    first = next(iter(recordings.values()))
    named = Path(model).stem if isinstance(model, str | Path) else None
    index: dict[str, Any] = {
        "format": "spawnml-web",
        "version": 1,
        "title": title or named or task or "model",
        "backends": list(recordings),
        "exports": exports,
    }
    if task:
        index["pipeline"] = {"task": first.task, "image": list(first.image_size),
                             "stages": [s for s in first.stages if s != "main"], **first.page}
    return index
