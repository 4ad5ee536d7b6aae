"""spawnml: run neural networks on any hardware from one operator source."""

from __future__ import annotations

from importlib import metadata as _metadata

from .backend import Backend, BackendInfo, Buffer, Capabilities, DeviceKind
from .dtypes import DType
from .errors import (
    BackendUnavailableError,
    InvalidInputError,
    InvalidModelError,
    KernelCompileError,
    KernelSyntaxError,
    KernelTypeError,
    SpawnMLError,
    UnsupportedOpError,
)
from .hookspecs import hookimpl
from .registry import get_available_backends, get_backend, list_backends
from .tensor import DeviceTensor


def __getattr__(name: str) -> object:
    # InferenceSession imports the graph runtime (and onnx) only when first used.
    if name in ("InferenceSession", "SessionOptions"):
        from . import session

        return getattr(session, name)
    raise AttributeError(f"module 'spawnml' has no attribute {name!r}")


try:
    __version__ = _metadata.version("spawnml-core")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

__all__ = [
    "Backend", "BackendInfo", "Buffer", "Capabilities", "DType", "DeviceKind", "DeviceTensor",
    "SpawnMLError", "InvalidModelError", "InvalidInputError", "UnsupportedOpError",
    "BackendUnavailableError", "KernelCompileError", "KernelSyntaxError", "KernelTypeError",
    "hookimpl", "InferenceSession", "SessionOptions", "list_backends", "get_available_backends",
    "get_backend", "__version__",
]
