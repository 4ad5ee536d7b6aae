"""Renderer contract: specialised KernelIR -> source text for one target.

``Renderer`` is the base of every target (C-like or not). A target declares its
:class:`~spawnml.kernel.traits.TargetTraits`; :meth:`Renderer.render` runs the core
lowering passes those traits choose (``spawnml.kernel.passes``) and prints the target-ready
IR with :meth:`Renderer.print_kernel`, a :class:`~spawnml.kernel.visitor.Visitor`.
``CStyleRenderer`` (``spawnml.kernel.cstyle``) holds what C-like targets share; the Wasm
backend prints the same IR as WAT from this base.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from ..dtypes import DType
from . import ir
from .passes import Slots, lower
from .traits import TargetTraits
from .types import ScalarType
from .vectorize import vector_width, vectorize
from .visitor import Visitor


def _identity_storage(dt: DType) -> DType:
    return dt


class Renderer(Visitor):
    """Base of all targets. Subclasses set ``name`` and ``traits`` and print the IR."""

    name: ClassVar[str] = "abstract"
    traits: TargetTraits = TargetTraits("abstract")
    """The target's facets; an instance may replace it (device-dependent f16, limits)."""

    slots: Slots | None = None
    """Set by targets with few input slots: where each input is read (``spawnml.kernel.slots``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Renderers written before ``traits`` existed keep their natives: ``native_intrinsics``
        (names), ``native_for`` (name -> kinds), C-style ``intrinsics`` (name -> template) and
        ``typed_intrinsics`` ((name, kind) -> template) are merged into the class's traits."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        legacy = {(n, "any"): n for n in own.get("native_intrinsics", ())}
        legacy |= {(n, k): n for n, ks in own.get("native_for", {}).items() for k in ks}
        legacy |= {(n, "any"): tpl for n, tpl in own.get("intrinsics", {}).items()}
        legacy |= dict(own.get("typed_intrinsics", {}))
        if legacy:
            intrinsics = {**cls.traits.intrinsics, **legacy}
            name = own.get("name", cls.traits.name)
            cls.traits = dataclasses.replace(cls.traits, name=name, intrinsics=intrinsics)

    def __init__(self, storage_dtype: Callable[[DType], DType] = _identity_storage) -> None:
        self.storage_dtype = storage_dtype

    @property
    def f16_arithmetic(self) -> bool:
        return self.traits.f16_arithmetic

    def is_native(self, fn: str, t: ScalarType) -> bool:
        return self.traits.is_native(fn, t)

    def lower(self, k: ir.KernelIR) -> ir.KernelIR:
        """``k`` through the core passes this target's traits choose (target-ready IR)."""
        return lower(k, self.traits, self.storage_dtype, self.slots)

    def functions(self, k: ir.KernelIR) -> list[ir.Function]:
        """Polyfill functions the kernel needs on this target, callees first."""
        return list(self.lower(k).functions)

    def render(self, k: ir.KernelIR) -> str:
        """The complete source of one specialised kernel."""
        lowered = self.lower(k)
        width = vector_width(self.traits.vector_width)
        if width > 1 and lowered.lane_groups:
            lowered = vectorize(lowered, width, self.storage_dtype,
                                self.traits.strided_vector_loads, self.traits.vector_calls)
        return self.print_kernel(lowered)

    def print_kernel(self, k: ir.KernelIR) -> str:  # pragma: no cover - abstract
        """Source text of a lowered kernel (its polyfills in ``k.functions``)."""
        raise NotImplementedError
