"""What a target declares about itself; the core passes (``spawnml.kernel.passes``) read it.

A renderer holds one :class:`TargetTraits` value. ``intrinsics`` is the one table of native
intrinsics: ``(name, kind) -> spelling``, where ``kind`` is a type (``"f32"``), a family
(``"float"``, ``"signed"``, ``"unsigned"``, ``"int"``, ``"num"``) or ``"any"``; the most
specific kind wins. An intrinsic without an entry for its argument type is a polyfill
(``spawnml.kernel.polyfills``), expanded before printing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .types import ScalarType

if TYPE_CHECKING:
    from .rewrite import PatternMatcher


def kinds(t: ScalarType) -> list[str]:
    """The keys a table may use for type ``t``, most specific first."""
    out = [t.value]
    if t.is_float:
        out += ["float", "num"]
    elif t.is_int:
        out += ["signed" if t.is_signed else "unsigned", "int", "num"]
    return [*out, "any"]


@dataclass(frozen=True)
class TargetTraits:
    """A target's facets: its intrinsics, the arithmetic it has, spellings, its buffers."""

    name: str
    intrinsics: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Native intrinsics: (name, kind) -> spelling (a template of ``{0}``, ``{1}``, ``{t}``)."""
    f16_arithmetic: bool = True
    """False: f16 is computed as f32 and rounded (``round_f16``) on casts and f32 stores."""
    bf16_arithmetic: bool = False
    """True: bf16 is computed natively. No target does: bf16 is computed as f32, rounded
    (``round_bf16``) on casts and stores (``spawnml.kernel.passes.bf16_memory``)."""
    int64: bool = True
    """False: i64 is computed (and stored) as i32 and u64 as u32; see ``int64_constants``."""
    int64_constants: str = "saturate"
    """Without int64, constants beyond i32: ``"saturate"`` or ``"error"`` (refuse the kernel)."""
    c_remainder: bool = True
    """False: ``%`` is unreliable for negative or float operands; it becomes ``a - b*(a/b)``."""
    nan_comparisons: bool = True
    """False: float ``!=`` and ``bool(float)`` compile as ordered (NaN-blind): rewritten."""
    bitcasts: Mapping[tuple[ScalarType, ScalarType], str] = field(default_factory=dict)
    """(source, target) -> template of ``{0}``; a missing pair uses the printer's default."""
    special_floats: Mapping[str, str] = field(default_factory=dict)
    """Spellings of the f32 values ``"nan"``, ``"inf"`` and ``"-inf"``."""
    buffers: str = "pointer"
    """How inputs are reached: ``"pointer"`` (kernel arguments), ``"binding"`` (storage
    bindings, packed when too few) or ``"texture"`` (texture units, packed when too few).
    Device limits (slots, ``max_loop_iterations``) are the backend's capabilities, checked
    by ``Backend.compile`` and the slot assignment (``spawnml.kernel.slots``)."""
    vector_width: int = 1
    """Lanes of the widest f32 vector the target computes with natively (OpenCL ``float4``):
    above 1, a register tile's innermost copies become vectors (``spawnml.kernel.vectorize``)."""
    vector_calls: frozenset[str] = frozenset()
    """Intrinsics (``min``, ``max``, ``sqrt``, ...) the target computes lane-wise on vectors
    with exactly its scalar result in every lane (``VecCall``)."""
    strided_vector_loads: int = 1
    """The largest step between lanes a vector load may have (``VecLoad.stride``): above 1
    the target loads the span and shuffles (Wasm: a stride-2 convolution's lanes). Such a
    load reads up to ``stride - 1`` elements past its last lane, so the target must keep
    that much readable memory after every buffer."""
    rules: PatternMatcher | None = None
    """The target's own rewrites, run last (tinygrad's ``extra_matcher``)."""

    def native(self, fn: str, t: ScalarType) -> str | None:
        """The spelling of intrinsic ``fn`` on an argument of type ``t``, None if polyfilled."""
        for kind in kinds(t):
            spelling = self.intrinsics.get((fn, kind))
            if spelling is not None:
                return spelling
        return None

    def is_native(self, fn: str, t: ScalarType) -> bool:
        return self.native(fn, t) is not None


def table(spellings: Mapping[str, str], kind: str = "any") -> dict[tuple[str, str], str]:
    """``{name: spelling}`` as intrinsic-table entries for one kind."""
    return {(name, kind): s for name, s in spellings.items()}
