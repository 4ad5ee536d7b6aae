"""Plugin discovery: each entry point of group ``spawnml`` is loaded on its own.

A plugin that fails to import is recorded with its error; it never breaks ``import spawnml``
or the CLI. ``SPAWNML_PLUGINS=a,b`` restricts loading to the named entry points.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Collection
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType

import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "spawnml"


@dataclass
class PluginRecord:
    """One entry point: where it came from, whether it loaded, what it implements."""

    name: str
    value: str
    distribution: str = ""
    version: str = ""
    hooks: list[str] = field(default_factory=list)
    error: str = ""
    loaded: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "entry_point": self.value,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": self.hooks,
            "loaded": self.loaded,
            "error": self.error,
        }


def _allowed() -> set[str] | None:
    raw = os.environ.get("SPAWNML_PLUGINS", "").strip()
    if not raw:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


class PluginManager:
    """Loads the ``spawnml`` entry points into a pluggy manager, one at a time."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.pm.hook

    def load_entry_points(self, only: Collection[str] | None = None) -> None:
        """Load each entry point on its own; ``only`` (default: SPAWNML_PLUGINS) filters names."""
        allowed = set(only) if only is not None else _allowed()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            record = PluginRecord(
                name=ep.name,
                value=ep.value,
                distribution=dist.metadata["Name"] if dist is not None else "",
                version=dist.version if dist is not None else "",
            )
            self.records.append(record)
            try:
                module = ep.load()
                self.register(module, ep.name, record)
            except Exception as exc:  # noqa: BLE001 - one plugin must never break the rest
                last = traceback.extract_tb(exc.__traceback__)[-1:]
                where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
                record.error = f"{type(exc).__name__}: {exc}{where}"

    def register(
        self, module: ModuleType | object, name: str, record: PluginRecord | None = None
    ) -> None:
        """Register a plugin object and check its hook implementations' names."""
        if record is None:
            record = PluginRecord(name=name, value=repr(module))
            self.records.append(record)
        try:
            self.pm.register(module, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:  # duplicate name, bad args
            raise PluginError(f"plugin {name!r}: {exc}") from None
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(module)
            raise PluginError(f"plugin {name!r}: {exc}") from None
        record.hooks = sorted(caller.name for caller in self.pm.get_hookcallers(module) or [])
        record.loaded = True

    def record_error(self, plugin: str, message: str) -> None:
        """Note that a loaded plugin failed later (in a hook); shown by ``spawnml plugins``."""
        for record in self.records:
            if record.name == plugin:
                record.error = message

    def failed(self) -> list[PluginRecord]:
        """The plugins that failed to load or whose hooks failed."""
        return [record for record in self.records if record.error]


_lock = threading.Lock()
_manager: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, loading entry points on first use."""
    global _manager
    with _lock:
        if _manager is None:
            manager = PluginManager()
            manager.load_entry_points()
            _manager = manager
        return _manager


def reset_plugin_manager() -> None:
    """Forget loaded plugins (tests; after changing ``SPAWNML_PLUGINS``)."""
    global _manager
    with _lock:
        _manager = None
    from . import registry

    registry.reset()
