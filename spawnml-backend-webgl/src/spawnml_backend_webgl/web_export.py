"""The webgl target of ``spawnml export-web``: the plan's GLSL ES 3.00 fragment shaders, their
texture units, packed inputs and viewports, run in a page's WebGL2 context by
``web/spawnml-webgl.mjs`` with the same texture layout as the Python backend (R32UI textures
``texture_width`` words wide, row-wrapped).

Kernels are planned for any WebGL2 context (``WebGLBackend(portable=True)``): 16 texture
units, no llvmpipe loop limit, the backend's 4096-wide layout (the runtime checks the page's
MAX_TEXTURE_SIZE and units against what the plan needs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spawnml.export import RecordedModel, WebTarget, write_weights

from .backend import WebGLBackend
from .packing import copy_shader
from .renderer import VERTEX_SHADER

RUNTIME = Path(__file__).parent / "web" / "spawnml-webgl.mjs"


class WebGLTarget(WebTarget):
    """GLSL ES 3.00 fragment shaders on the page's WebGL2 context."""

    name = "webgl"

    def backend(self) -> WebGLBackend:
        return WebGLBackend(portable=True)

    def write(self, recorded: RecordedModel, directory: Path, **options: Any
              ) -> dict[str, Any]:
        backend = recorded.backend
        assert isinstance(backend, WebGLBackend)
        layout = backend.layout
        (directory / "shaders").mkdir(parents=True, exist_ok=True)
        weights = write_weights(recorded, directory / "model.weights")
        kernels: dict[str, int] = {}
        entries = []
        for program in recorded.programs():
            key = program.kernel.key
            kernels[key] = len(entries)
            file = f"shaders/{len(entries):03d}_{program.kernel.name}.frag"
            (directory / file).write_text(program.source)
            units = len(program.plan.direct) + (1 if program.plan.packed else 0)
            entries.append({"file": file, "name": program.kernel.name, "units": units})
        launches = []
        for launch in recorded.launches:
            program = launch.program
            plan = program.plan
            launches.append({
                "kernel": kernels[program.kernel.key], "out": launch.out,
                "direct": [launch.ins[slot] for slot in plan.direct],
                "packed": [[launch.ins[i], offset, words] for i, offset, words in plan.packed],
                "pack_words": plan.pack_words,
                "viewport": list(layout.viewport(program.kernel.size)),
                "label": launch.label,
            })
        rows = max((layout.rows(-(-b.nbytes // 4)) for b in recorded.buffers), default=1)
        manifest = {
            "format": "spawnml-webgl",
            "version": 1,
            "runtime": RUNTIME.name,
            "texture_width": layout.width,
            "needs": {"MAX_TEXTURE_SIZE": max(layout.width, rows),
                      "MAX_TEXTURE_IMAGE_UNITS": max((e["units"] for e in entries), default=1)},
            "vertex_shader": VERTEX_SHADER,
            "copy_shader": copy_shader(layout),
            "weights": weights,
            "buffers": [{"bytes": b.nbytes, "kind": b.kind} for b in recorded.buffers],
            "inputs": [t.manifest() for t in recorded.inputs],
            "outputs": [t.manifest() for t in recorded.outputs],
            "kernels": entries,
            "launches": launches,
            "checks": [{"buffer": c.buffer, "size": c.size, "message": c.message}
                       for c in recorded.checks],
        }
        (directory / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.copyfile(RUNTIME, directory / RUNTIME.name)
        return manifest

