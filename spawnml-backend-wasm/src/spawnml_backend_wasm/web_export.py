"""The wasm target of ``spawnml export-web``: the module of ``export-wasm`` (one thread), run
in a page by ``web/spawnml-wasm-web.mjs`` through ``spawnml-model.mjs``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spawnml.export import RecordedModel, WebTarget

from .backend import WasmBackend
from .export import _layout, write_module

RUNTIME = Path(__file__).parent / "web" / "spawnml-wasm-web.mjs"


class WasmTarget(WebTarget):
    """The whole plan as one WebAssembly module (SIMD128) on the page's main thread."""

    name = "wasm"

    def backend(self) -> WasmBackend:
        return WasmBackend(threads=1)

    def write(self, recorded: RecordedModel, directory: Path) -> dict[str, Any]:
        plan = _layout(recorded)
        plan.parts = [1] * len(plan.calls)
        manifest = write_module(plan, directory)
        manifest["runtime"] = RUNTIME.name
        (directory / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.copyfile(RUNTIME, directory / RUNTIME.name)
        return manifest
