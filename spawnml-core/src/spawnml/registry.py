"""What plugins registered: backends (and later ops, kernels, pipelines), collected once."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from .backend import Backend, BackendInfo, DeviceKind
from .errors import BackendUnavailableError, PluginError
from .plugins import get_plugin_manager

_lock = threading.RLock()
_backend_classes: dict[str, tuple[type[Backend], str]] | None = None
_instances: dict[str, Backend] = {}


def reset() -> None:
    global _backend_classes
    with _lock:
        for instance in _instances.values():
            instance.close()
        _instances.clear()
        _backend_classes = None


def backend_classes() -> dict[str, tuple[type[Backend], str]]:
    """Registered backend classes by name, with the plugin that registered each."""
    global _backend_classes
    with _lock:
        if _backend_classes is None:
            pm = get_plugin_manager()
            found: dict[str, tuple[type[Backend], str]] = {}
            for impl in pm.pm.hook.spawnml_register_backends.get_hookimpls():
                plugin_name = impl.plugin_name

                def register(cls: type, _plugin: str = plugin_name) -> None:
                    if not (isinstance(cls, type) and issubclass(cls, Backend)):
                        raise PluginError(f"plugin {_plugin!r} registered {cls!r}, not a Backend")
                    if cls.name in found and found[cls.name][0] is not cls:
                        raise PluginError(
                            f"backend name {cls.name!r} registered twice "
                            f"(by {found[cls.name][1]!r} and {_plugin!r})"
                        )
                    found[cls.name] = (cls, _plugin)

                try:
                    impl.function(register=register)
                except Exception as exc:  # noqa: BLE001 - recorded, never fatal
                    pm.record_error(plugin_name, f"spawnml_register_backends failed: {exc}")
            _backend_classes = found
        return _backend_classes


def _probe(name: str, cls: type[Backend], plugin: str) -> BackendInfo:
    try:
        info = cls.probe()
    except Exception as exc:  # noqa: BLE001 - a probe must never take the CLI down
        info = BackendInfo(name=name, available=False, reason=f"probe raised {exc!r}")
    return dataclasses.replace(info, plugin=plugin)


_ORDER = {DeviceKind.GPU: 0, DeviceKind.CPU: 1, DeviceKind.EMULATED: 2, DeviceKind.NONE: 3}
_GPU_PREFERENCE = ["cuda", "webgpu", "opencl", "webgl", "cpu", "wasm"]


def _rank(info: BackendInfo) -> tuple[int, int, str]:
    known = info.name in _GPU_PREFERENCE
    pref = _GPU_PREFERENCE.index(info.name) if known else len(_GPU_PREFERENCE)
    return (_ORDER[info.device_kind], pref, info.name)


def list_backends() -> list[BackendInfo]:
    """A BackendInfo for every registered backend, available or not, in preference order."""
    infos = [_probe(name, cls, plugin) for name, (cls, plugin) in backend_classes().items()]
    return sorted(infos, key=_rank)


def get_available_backends() -> list[str]:
    """Names of available backends: real GPUs first, then cpu, then emulated devices."""
    return [info.name for info in list_backends() if info.available]


def get_backend(name: str, **options: Any) -> Backend:
    """The process-wide instance of a backend (created on first use)."""
    with _lock:
        if name in _instances and not options:
            return _instances[name]
        classes = backend_classes()
        if name not in classes:
            known = ", ".join(sorted(classes)) or "none"
            raise BackendUnavailableError(
                f"no backend named {name!r} is registered (registered: {known})"
            )
        cls, plugin = classes[name]
        info = _probe(name, cls, plugin)
        if not info.available:
            raise BackendUnavailableError(f"backend {name!r} is unavailable: {info.reason}")
        instance = cls(**options)
        if not options:
            _instances[name] = instance
        return instance
