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
from spawnml.export import record_model, web_targets

WEB = Path(__file__).parent / "web"
DEFAULT_BACKENDS = ("webgpu", "webgl", "wasm")


def export_web(model: Any, directory: str | Path, backends: Sequence[str] = DEFAULT_BACKENDS,
               shapes: dict[str, tuple[int, ...]] | None = None, title: str | None = None,
               threads: int = 1) -> dict[str, Any]:
    """Write the site for ``model`` (a path, bytes or ModelProto) into ``directory`` for each
    of ``backends`` (registered web targets); returns ``export.json``'s content.
    ``threads > 1``: the wasm target also writes a module for that many threads (used by
    cross-origin isolated pages)."""
    if not 1 <= threads <= 64:
        raise InvalidInputError(f"threads must be between 1 and 64, got {threads}")
    targets = web_targets()
    if not backends:
        raise InvalidInputError("export-web needs at least one backend")
    unknown = [b for b in backends if b not in targets]
    if unknown:
        raise InvalidInputError(f"export-web: no web target named {unknown} (installed: "
                                f"{sorted(targets)})")
    directory = Path(directory)
    recorded: dict[str, Any] = {}
    exports: dict[str, Any] = {}
    tensors: dict[str, list[dict[str, Any]]] = {}
    created = not directory.exists()
    try:
        for name in dict.fromkeys(backends):  # every plan first: a failure writes nothing
            start = time.perf_counter()
            backend = targets[name].backend()
            try:
                recorded[name] = record_model(model, backend, shapes)
            except BaseException:
                backend.close()
                raise
            exports[name] = {"seconds": time.perf_counter() - start}
        for name, plan in recorded.items():
            start = time.perf_counter()
            manifest = targets[name].write(plan, directory / name, threads=threads)
            tensors = {kind: [{"name": t.name, "dtype": t.dtype.name, "shape": list(t.shape)}
                              for t in getattr(plan, kind)] for kind in ("inputs", "outputs")}
            exports[name] = {
                "kernels": len(plan.programs()), "launches": len(plan.launches),
                "weights_bytes": manifest["weights"]["bytes"],
                "seconds": round(exports[name]["seconds"] + time.perf_counter() - start, 3),
            }
    except BaseException:
        if created and directory.exists():
            shutil.rmtree(directory)
        raise
    finally:
        for plan in recorded.values():
            plan.backend.close()
    index = {
        "format": "spawnml-web",
        "version": 1,
        "title": title or (Path(model).stem if isinstance(model, str | Path) else "model"),
        "backends": list(exports),
        **tensors,
        "exports": exports,
    }
    (directory / "export.json").write_text(json.dumps(index, indent=1) + "\n")
    for name in ("spawnml.mjs", "index.html"):
        shutil.copyfile(WEB / name, directory / name)
    return index
