"""What plugins registered: backends, ops and kernels, collected once.

Each plugin's hooks run on their own (``plugins.IsolatingPluginManager``): a plugin whose
hook raises, or registers something invalid, is recorded with the error (``spawnml
plugins``) and everything the other plugins registered is kept.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from .backend import Backend, BackendInfo, DeviceKind
from .errors import BackendUnavailableError, InvalidInputError, PluginError
from .plugins import describe_error, get_plugin_manager

_lock = threading.RLock()
_backend_classes: dict[str, tuple[type[Backend], str]] | None = None
_instances: dict[str, Backend] = {}


def reset() -> None:
    global _backend_classes, _ops, _kernels
    with _lock:
        _ops = None
        _kernels = None
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
                    pm.record_error(
                        plugin_name, f"spawnml_register_backends failed: {describe_error(exc)}"
                    )
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


def backend_names(spec: str | Sequence[Any] | None) -> list[Any] | None:
    """A backend list from what a user passes: ``None`` (the default), one name, a
    comma-separated string (``"webgpu,cpu"``) or a sequence of names/Backend objects."""
    if spec is None:
        return None
    if isinstance(spec, str):
        names = [part.strip() for part in spec.split(",") if part.strip()]
        if not names:
            raise InvalidInputError(f"no backend named in {spec!r}")
        return names
    return list(spec)


def get_backend(name: str, **options: Any) -> Backend:
    """The process-wide instance of a backend (created on first use)."""
    with _lock:
        if name in _instances and not options:
            return _instances[name]
        classes = backend_classes()
        if name not in classes:
            known = ", ".join(sorted(classes)) or "none"
            failed = "".join(
                f"; plugin {r.name!r} failed{'' if r.loaded else ' to load'}: {r.error}"
                for r in get_plugin_manager().failed()
            )
            raise BackendUnavailableError(
                f"no backend named {name!r} is registered (registered: {known}){failed}"
            )
        cls, plugin = classes[name]
        info = _probe(name, cls, plugin)
        if not info.available:
            raise BackendUnavailableError(f"backend {name!r} is unavailable: {info.reason}")
        instance = cls(**options)
        if not options:
            _instances[name] = instance
        return instance


def collect_all() -> None:
    """Run every registration hook the registry collects (backends, ops, kernels) now, so
    that each plugin's hook errors are recorded, e.g. before ``spawnml plugins`` lists them."""
    backend_classes()
    op_definitions()
    kernel_table()


# -- operators ---------------------------------------------------------------------------

_ops: dict[tuple[str, str], list[Any]] | None = None


def op_definitions() -> dict[tuple[str, str], list[Any]]:
    """Registered OpDefs by (domain, op_type), each list ordered by ``since_version``."""
    global _ops
    with _lock:
        if _ops is None:
            from .op import OpDef

            found: dict[tuple[str, str], list[Any]] = {}

            def register(op: Any) -> None:
                if isinstance(op, type):
                    op = op()
                if not isinstance(op, OpDef):
                    raise PluginError(f"register_ops got {op!r}, not an OpDef")
                key = ("" if op.domain == "ai.onnx" else op.domain, op.op_type)
                found.setdefault(key, []).append(op)

            get_plugin_manager().hook.spawnml_register_ops(register=register)
            for defs in found.values():
                defs.sort(key=lambda d: d.since_version)
            _ops = found
        return _ops


def find_op(domain: str, op_type: str, opset: int) -> Any:
    """The OpDef implementing ``op_type`` at ``opset``, or UnsupportedOpError saying why."""
    from .errors import UnsupportedOpError

    domain = "" if domain == "ai.onnx" else domain
    defs = op_definitions().get((domain, op_type))
    if not defs:
        where = f"domain {domain!r}" if domain else "the ai.onnx domain"
        raise UnsupportedOpError(f"operator {op_type!r} of {where} is not implemented")
    for d in reversed(defs):
        if d.supports_opset(opset):
            return d
    ranges = ", ".join(repr(d) for d in defs)
    raise UnsupportedOpError(f"{op_type} at opset {opset} is not implemented (have: {ranges})")


_kernels: dict[tuple[str, str, str], list[Any]] | None = None


def kernel_table() -> dict[tuple[str, str, str], list[Any]]:
    """Registered backend kernels by (backend, domain, op_type), collected once."""
    global _kernels
    with _lock:
        if _kernels is None:
            from .op import BackendKernel

            found: dict[tuple[str, str, str], list[Any]] = {}

            def register(k: Any) -> None:
                if isinstance(k, type):
                    k = k()
                if not isinstance(k, BackendKernel):
                    raise PluginError(f"register_kernels got {k!r}, not a BackendKernel")
                dom = "" if k.domain == "ai.onnx" else k.domain
                found.setdefault((k.backend, dom, k.op_type), []).append(k)

            get_plugin_manager().hook.spawnml_register_kernels(register=register)
            _kernels = found
        return _kernels


def backend_kernels(backend: str, domain: str, op_type: str) -> list[Any]:
    """Backend-specific kernels registered for an op (``spawnml_register_kernels``)."""
    return kernel_table().get((backend, "" if domain == "ai.onnx" else domain, op_type), [])
