"""Host arithmetic for the narrow ONNX element types (bfloat16, float8, float4e2m1,
int4/uint4, int2/uint2): Cast, and Quantize/DequantizeLinear to and from them.

No kernel type holds these, so the ops that touch them run on the host (declared with
``HostOnly``). numpy computes them through ``ml_dtypes`` arrays (one element per byte;
ONNX's 4-bit and 2-bit packing is undone when a TensorProto is decoded). The semantics
follow the ONNX operator specification as onnx.reference implements it:

* float8 targets with ``saturate=1`` clamp to the largest finite value (±Inf included);
  with ``saturate=0`` out-of-range values become Inf (e5m2) or NaN (the others);
* float8e8m0 keeps only the exponent, rounded as ``round_mode`` says (up/down/nearest);
* float4e2m1, int4 and int2 targets take ml_dtypes' conversion (float4 saturates).
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError
from spawnml.op import HostOnly, Node

FLOAT8 = frozenset(d for d in DType if d.is_float8)
"""The four signed float8 types (the ``saturate`` attribute applies to them)."""

NARROW = frozenset(d for d in DType if d.is_exotic) | {DType.bfloat16}
"""Element types that only the host computes (Cast and the quantisation ops)."""

QUANT_RANGES: dict[DType, tuple[int, int]] = {
    DType.int4: (-8, 7), DType.uint4: (0, 15), DType.int2: (-2, 1), DType.uint2: (0, 3),
}
"""Saturation bounds of the sub-byte integer quantised types."""

QUANT_TYPES = frozenset({*FLOAT8, DType.float4_e2m1fn, *QUANT_RANGES})
"""Narrow types Quantize/DequantizeLinear accept as quantised values."""

# First opset whose Cast / QuantizeLinear / DequantizeLinear accepts the type.
_SINCE = {
    DType.bfloat16: 13, **{d: 19 for d in FLOAT8}, DType.int4: 21, DType.uint4: 21,
    DType.float4_e2m1fn: 23, DType.float8_e8m0fnu: 24, DType.int2: 25, DType.uint2: 25,
}

_E8M0_NAN = 0xFF
_E8M0_MAX_EXPONENT = 0xFE


def since_opset(dt: DType) -> int:
    """The first ai.onnx opset whose Cast accepts ``dt`` (1 for the standard types)."""
    return _SINCE.get(dt, 1)


def is_narrow(*dts: DType | None) -> bool:
    """Whether any of the types needs the host (no kernel element type)."""
    return any(d in NARROW for d in dts if d is not None)


def require_host(node: Node, *dts: DType | None) -> None:
    """Raise HostOnly when any of the types is narrow (called from ``lower``)."""
    narrow = sorted({str(d) for d in dts if d in NARROW})
    if narrow:
        raise HostOnly(f"{node.describe()}: element type {', '.join(narrow)} has no kernel "
                       "type, so the node runs on the host")


_BY_NAME = {d.value: d for d in NARROW}


def _widen(x: np.ndarray) -> np.ndarray:
    """A narrow array as a standard numpy type that holds every value exactly."""
    src = _BY_NAME.get(x.dtype.name)
    if src is None:
        return x
    return x.astype(np.float32 if src.is_float else np.int8)


def cast_array(x: np.ndarray, to: DType, saturate: bool = True,
               round_mode: str = "up") -> np.ndarray:
    """``x`` cast to ``to`` as ONNX Cast does, for any source or target type (ml_dtypes
    converts between any two types directly, with one rounding)."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if to in FLOAT8 and saturate:
            return saturate_float8(x, to)
        if to is DType.float8_e8m0fnu:
            return to_e8m0(x, saturate, round_mode)
        return x.astype(to.numpy)


def saturate_float8(x: np.ndarray, to: DType) -> np.ndarray:
    """Round to nearest even into a float8 type, clamping to its finite range."""
    import ml_dtypes

    info = ml_dtypes.finfo(to.numpy)
    lo, hi = float(info.min), float(info.max)
    if x.dtype.kind in "iub":
        x = x.astype(np.float64)  # every integer of these widths clamps exactly
    else:
        x = _widen(x)  # narrow floats are exact in float32, where numpy can clip
    return np.clip(x, lo, hi).astype(to.numpy)


def to_e8m0(x: np.ndarray, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """float8e8m0 (2**(e-127), no sign, no zero): the float32 exponent of ``|x|`` rounded
    by ``round_mode``. Inf and NaN give NaN; ``saturate`` stops rounding at the largest
    exponent (254) instead of overflowing to NaN."""
    import ml_dtypes

    bits = np.ascontiguousarray(np.asarray(x, np.float32)).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "up":
        bump = (bits & 0x7FFFFF) != 0
    elif round_mode == "down":
        bump = np.zeros(bits.shape, bool)
    elif round_mode == "nearest":
        # The guard bit decides; a tie rounds up unless the number is subnormal (exponent
        # 0), where only a non-zero rest below the guard bit does.
        guard = (bits & 0x400000) != 0
        rest = (bits & 0x3FFFFF) != 0
        bump = guard & (rest | (exponent > 0))
    else:
        raise ValueError(f"round_mode must be up, down or nearest, got {round_mode!r}")
    bump &= ~special
    if saturate:
        bump &= exponent != _E8M0_MAX_EXPONENT
    out = np.where(special, _E8M0_NAN, np.minimum(exponent + bump, _E8M0_NAN))
    return out.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def quantize_narrow(scaled: np.ndarray, zero_point: np.ndarray | None, to: DType,
             saturate: bool = True) -> np.ndarray:
    """QuantizeLinear's last step for a narrow type, given ``x / scale``.

    Integers round half to even, add the zero point and saturate; float8 ignores the
    zero point (the spec requires it to be 0) and saturates unless ``saturate=0``;
    float4e2m1 adds it and converts (ml_dtypes saturates: the type has no Inf)."""
    if to in QUANT_RANGES:
        lo, hi = QUANT_RANGES[to]
        q = np.rint(scaled).astype(np.int32)
        if zero_point is not None:
            q = q + _widen(np.asarray(zero_point)).astype(np.int32)
        return np.clip(q, lo, hi).astype(to.numpy)
    if to in FLOAT8:
        return cast_array(scaled, to, saturate)
    if to is DType.float4_e2m1fn:
        if zero_point is not None:
            scaled = scaled + _widen(np.asarray(zero_point))
        return scaled.astype(to.numpy)
    raise ValueError(f"{to} is not a quantised type")


def dequantize_values(x: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    """``x - zero_point`` as float32 for a narrow quantised ``x`` (float types have no
    zero point to subtract: the spec requires it to be 0)."""
    x = np.asarray(x)
    dx = _widen(x).astype(np.float32)
    if zero_point is not None and _BY_NAME.get(x.dtype.name) in QUANT_RANGES:
        dx = dx - _widen(np.asarray(zero_point)).astype(np.float32)
    return dx


def check_float_zero_point(node: Node, zero_point: np.ndarray | None) -> None:
    """A float8 zero point must be all zeros, as the spec requires."""
    if zero_point is None:
        return
    if np.any(_widen(np.asarray(zero_point)) != 0):
        raise InvalidModelError(f"{node.describe()}: a float8 zero point must be 0")
