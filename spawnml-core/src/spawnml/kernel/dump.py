"""``SPAWNML_DUMP_KERNELS=DIR``: write every rendered kernel's source, per backend."""

from __future__ import annotations

import os
from pathlib import Path

from .ir import KernelIR


def write(backend: str, kernel: KernelIR, source: str, suffix: str) -> Path | None:
    """Write ``source`` to ``$SPAWNML_DUMP_KERNELS/<backend>/<kernel key>.<suffix>``."""
    root = os.environ.get("SPAWNML_DUMP_KERNELS")
    if not root:
        return None
    folder = Path(root) / backend
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kernel.key}.{suffix}"
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(source, encoding="utf-8")
    os.replace(tmp, path)
    return path
