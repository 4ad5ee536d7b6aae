"""Plugin discovery: each entry point of group ``spawnml`` is loaded on its own.

A plugin that fails to import is recorded with its error; it never breaks ``import spawnml``
or the CLI. ``SPAWNML_PLUGINS=a,b`` restricts loading to the named entry points.

Every hook is called one plugin at a time (``IsolatingPluginManager``): an exception raised
by a plugin's implementation (or by the ``register`` callback refusing what it registered)
is recorded against that plugin, shown by ``spawnml plugins``, and the other plugins'
implementations still run, so one broken plugin never breaks a session or a command.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "spawnml"
log = logging.getLogger("spawnml.plugins")


def describe_error(exc: BaseException) -> str:
    """``Type: message (file:line)``, the line being where it was raised."""
    last = traceback.extract_tb(exc.__traceback__)[-1:]
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


class IsolatingPluginManager(pluggy.PluginManager):
    """A pluggy manager that runs each plugin's implementation of a hook on its own: an
    exception is reported to ``on_error(plugin_name, hook_name, exc)`` and the remaining
    implementations still run (results are gathered as pluggy does, in its call order).

    Hooks with wrapper implementations run as one pluggy call (a wrapper wraps them all);
    spawnml's hooks have none."""

    def __init__(self, project: str, on_error: Callable[[str, str, Exception], None]) -> None:
        super().__init__(project)
        self._on_error = on_error

    def _hookexec(
        self,
        hook_name: str,
        methods: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, object],
        firstresult: bool,
    ) -> Any:
        if any(m.hookwrapper or m.wrapper for m in methods):
            return super()._hookexec(hook_name, methods, kwargs, firstresult)
        results: list[object] = []
        for method in reversed(methods):  # pluggy calls the last registered first
            try:
                found = super()._hookexec(hook_name, [method], kwargs, firstresult)
            except Exception as exc:  # noqa: BLE001 - recorded against the plugin
                self._on_error(method.plugin_name, hook_name, exc)
                continue
            if firstresult:
                if found is not None:
                    return found
            else:
                results.extend(found)
        return None if firstresult else results


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
        self.pm = IsolatingPluginManager(hookspecs.PROJECT, self._hook_failed)
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []
        self._lock = threading.Lock()

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
                record.error = describe_error(exc)

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
        """Note that a loaded plugin failed later (in a hook); shown by ``spawnml plugins``.
        Each distinct message is kept once (a hook may be called many times)."""
        with self._lock:
            record = next((r for r in self.records if r.name == plugin), None)
            if record is None:  # registered on ``pm`` directly, bypassing ``register``
                record = PluginRecord(name=plugin, value="", loaded=True)
                self.records.append(record)
            if message in record.error:
                return
            record.error = f"{record.error}; {message}" if record.error else message
        log.warning("plugin %r failed: %s (see `spawnml plugins`)", plugin, message)

    def _hook_failed(self, plugin: str, hook: str, exc: Exception) -> None:
        self.record_error(plugin, f"{hook} failed: {describe_error(exc)}")

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
