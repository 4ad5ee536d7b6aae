"""The wasm target of ``spawnml export-web``: the module of ``export-wasm`` (one thread), run
in a page by ``web/spawnml-wasm-web.mjs`` through ``spawnml-model.mjs``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError
from spawnml.export import RecordedModel, WebTarget

from .backend import WasmBackend
from .export import _layout, assemble, write_module

RUNTIME = Path(__file__).parent / "web" / "spawnml-wasm-web.mjs"


class WasmTarget(WebTarget):
    """The whole plan as one WebAssembly module (SIMD128) on the page's main thread; with
    ``threads=N`` also a module for N worker threads on a shared memory, which the page
    uses when it is cross-origin isolated."""

    name = "wasm"

    def backend(self) -> WasmBackend:
        return WasmBackend(threads=1)

    def write(self, recorded: RecordedModel, directory: Path, threads: int = 1,
              **options: Any) -> dict[str, Any]:
        if not 1 <= threads <= 64:
            raise InvalidInputError(f"threads must be between 1 and 64, got {threads}")
        plan = _layout(recorded)
        plan.parts = [1] * len(plan.calls)
        manifest = write_module(plan, directory)
        manifest["runtime"] = RUNTIME.name
        if threads > 1:  # the same layout (so the same weights file) on a shared memory
            plan.threads = threads
            plan.parts = [p.parts(threads) for p in plan.programs]
            binary = assemble(plan)
            (directory / "model-threads.wasm").write_bytes(binary)
            manifest["threaded"] = {"module": "model-threads.wasm", "module_bytes": len(binary),
                                    "threads": threads,
                                    "split_launches": sum(p > 1 for p in plan.parts)}
        (directory / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.copyfile(RUNTIME, directory / RUNTIME.name)
        return manifest
