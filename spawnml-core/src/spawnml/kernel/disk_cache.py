"""A per-backend on-disk cache of compiled kernels (program binaries, PTX).

Location: ``$SPAWNML_CACHE_DIR/kernels/<backend>/`` (default ``$XDG_CACHE_HOME/spawnml`` or
``~/.cache/spawnml``). ``SPAWNML_CACHE_DIR=off`` disables it. The caller builds the key from
everything that changes the compiled bytes (source hash, device, driver/compiler version);
a cache that cannot be written is skipped, never an error.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path | None:
    """spawnml's cache folder, or None when disabled."""
    root = os.environ.get("SPAWNML_CACHE_DIR")
    if root == "off":
        return None
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "spawnml" if xdg else Path.home() / ".cache" / "spawnml"


class KernelDiskCache:
    """Bytes by key under ``<cache root>/kernels/<backend>``."""

    def __init__(self, backend: str, suffix: str) -> None:
        root = cache_root()
        self.folder = root / "kernels" / backend if root else None
        self.suffix = suffix

    def path(self, *key_parts: str) -> Path | None:
        if self.folder is None:
            return None
        digest = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:32]
        return self.folder / f"{digest}.{self.suffix}"

    def get(self, *key_parts: str) -> bytes | None:
        path = self.path(*key_parts)
        try:
            return path.read_bytes() if path else None
        except OSError:
            return None

    def put(self, data: bytes, *key_parts: str) -> None:
        path = self.path(*key_parts)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)  # atomic: concurrent processes never read half a file
        except OSError:
            pass  # a read-only home must not break compilation

    def put_first(self, data: bytes, *key_parts: str) -> bytes:
        """Store ``data`` unless the key holds bytes already; return what the key holds.
        Processes racing to store a decision all end up with the first one stored."""
        path = self.path(*key_parts)
        if path is None:
            return data
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            try:
                os.link(tmp, path)  # atomic, and fails where the key exists
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
            return path.read_bytes()
        except OSError:
            return data

