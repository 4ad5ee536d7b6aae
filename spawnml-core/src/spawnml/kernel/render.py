"""Renderer contract: specialised KernelIR -> source text for one target.

``Renderer`` is the base of every target (C-like or not): it knows which intrinsics the
target has natively and collects the polyfill functions the rest need. ``CStyleRenderer``
(``spawnml.kernel.cstyle``) holds what C-like targets share; the Wasm backend renders the same
tree to WAT from this base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ..dtypes import DType
from . import ir
from .polyfills import required_functions
from .types import ScalarType


def _identity_storage(dt: DType) -> DType:
    return dt


class Renderer:
    """Base of all targets. Subclasses set ``name`` and ``native_intrinsics``."""

    name: ClassVar[str] = "abstract"
    native_intrinsics: ClassVar[frozenset[str]] = frozenset()
    """Intrinsics the target implements for every type the language allows."""
    native_for: ClassVar[dict[str, frozenset[str]]] = {}
    """Intrinsics the target implements only for some type kinds: name -> {"float", "int", ...}."""

    def __init__(self, storage_dtype: Callable[[DType], DType] = _identity_storage) -> None:
        self.storage_dtype = storage_dtype

    def is_native(self, fn: str, t: ScalarType) -> bool:
        if fn in self.native_intrinsics:
            return True
        kinds = self.native_for.get(fn)
        if not kinds:
            return False
        kind = "float" if t.is_float else ("bool" if t == ScalarType.bool else "int")
        signedness = "signed" if t.is_signed else "unsigned"
        return bool({kind, t.value, signedness} & kinds)

    def functions(self, k: ir.KernelIR) -> list[ir.Function]:
        """Polyfill functions the kernel needs on this target, callees first."""
        return required_functions(k.body, self.is_native)

    def render(self, k: ir.KernelIR) -> str:  # pragma: no cover - abstract
        raise NotImplementedError
