"""The webgpu target of ``spawnml export-web``: the plan's WGSL kernels, their bindings and
dispatch grids, the buffer plan and the weights, run in a page by ``web/spawnml-webgpu.mjs``.

Kernels are planned for any WebGPU device (``WebGPUBackend(portable=True)``): within
``WEB_LIMITS`` (what every browser's device grants), without shader-f16 and without lavapipe's
loop limit, so the export runs on any WebGPU device, including one the page passes in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spawnml.export import RecordedModel, WebTarget, write_weights

from .backend import WebGPUBackend

RUNTIME = Path(__file__).parent / "web" / "spawnml-webgpu.mjs"


class WebGPUTarget(WebTarget):
    """WGSL compute shaders on the page's WebGPU device."""

    name = "webgpu"

    def backend(self) -> WebGPUBackend:
        return WebGPUBackend(portable=True)

    def write(self, recorded: RecordedModel, directory: Path, **options: Any
              ) -> dict[str, Any]:
        kernels_dir = directory / "kernels"
        kernels_dir.mkdir(parents=True, exist_ok=True)
        weights = write_weights(recorded, directory / "model.weights")
        kernels: dict[str, int] = {}
        kernel_entries = []
        for program in recorded.programs():
            kernels[program.key] = len(kernel_entries)
            file = f"kernels/{len(kernel_entries):03d}_{program.name}.wgsl"
            (directory / file).write_text(program.source)
            kernel_entries.append({"file": file, "name": program.name,
                                   "bindings": len(program.layout.inputs)})  # fmt: skip
        launches = []
        for launch in recorded.launches:
            program = launch.program
            bindings = []
            for binding in program.layout.inputs:
                members = [[launch.ins[m.input], m.byte_offset, m.copy_bytes]
                           for m in binding.members]  # fmt: skip
                if binding.packed:
                    bindings.append({"packed": members, "bytes": max(binding.nbytes, 4)})
                else:
                    bindings.append({"buffer": members[0][0]})
            launches.append({"kernel": kernels[program.key], "out": launch.out,
                             "bindings": bindings, "grid": list(program.layout.grid),
                             "label": launch.label})  # fmt: skip
        manifest = {
            "format": "spawnml-webgpu",
            "version": 1,
            "runtime": RUNTIME.name,
            "limits": _limits_needed(recorded),
            "weights": weights,
            "buffers": [{"bytes": b.nbytes, "kind": b.kind} for b in recorded.buffers],
            "inputs": [t.manifest() for t in recorded.inputs],
            "outputs": [t.manifest() for t in recorded.outputs],
            "kernels": kernel_entries,
            "launches": launches,
            "checks": [{"buffer": c.buffer, "size": c.size, "message": c.message}
                       for c in recorded.checks],
        }
        (directory / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.copyfile(RUNTIME, directory / RUNTIME.name)
        return manifest



def _limits_needed(recorded: RecordedModel) -> dict[str, int]:
    """The device limits the plan needs (the runtime checks a device it is given)."""
    biggest = max((b.nbytes for b in recorded.buffers), default=4)
    bindings = max((len(p.layout.inputs) + 1 for p in recorded.programs()), default=1)
    grid = max((max(p.layout.grid) for p in recorded.programs()), default=1)
    return {"maxStorageBuffersPerShaderStage": bindings, "maxBufferSize": biggest,
            "maxStorageBufferBindingSize": biggest, "maxComputeWorkgroupsPerDimension": grid}
