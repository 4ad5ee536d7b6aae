"""The core lowering pipeline: a specialised KernelIR -> the target-ready IR a printer prints.

Which passes run is decided by the target's :class:`~spawnml.kernel.traits.TargetTraits`:

1. types the target lacks: f16 computed as f32 (rounded with ``round_f16`` on every cast to
   f16 and on storing an f16 result into f32 storage), i64 computed as i32;
2. target fixes: C-style ``%`` where ``%`` is unreliable, NaN-correct ``!=`` and
   ``bool(float)`` where comparisons are ordered, then the target's own rules;
3. polyfill expansion: every intrinsic the target lacks becomes a call of a helper function
   specialised from ``spawnml.kernel.polyfills`` (and lowered by the same passes), carried in
   ``KernelIR.functions``, so printing never goes back to specialisation.

Every pass is a set of rules for the one rewriter (``spawnml.kernel.rewrite``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..dtypes import DType
from ..errors import KernelCompileError
from . import ir
from .ir import Op
from .polyfills import required_functions
from .rewrite import PatternMatcher, rewrite_body, rewrite_function, rewrite_kernel
from .traits import TargetTraits
from .types import ScalarType

F16, F32, I32, I64, U32, BOOL = (
    ScalarType.f16, ScalarType.f32, ScalarType.i32, ScalarType.i64, ScalarType.u32,
    ScalarType.bool,
)
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _retype(src: ScalarType, dst: ScalarType) -> PatternMatcher:
    """Every value of type ``src`` becomes ``dst``; casts that become no-ops disappear."""

    def cast(e: ir.Cast) -> ir.Expr | None:
        if e.x.type == e.type:
            return e.x
        return dataclasses.replace(e, type=dst) if e.type == src else None

    def other(e: ir.Expr) -> ir.Expr | None:
        return dataclasses.replace(e, type=dst) if e.type == src else None

    return PatternMatcher([(ir.Cast, cast), (ir.Expr, other)])


def _round_f16(x: ir.Expr) -> ir.Call:
    return ir.Call(F32, "round_f16", (x if x.type == F32 else ir.Cast(F32, x),))


def emulate_f16() -> PatternMatcher:
    """f16 computed as f32: constants take their float16 value, casts to f16 round."""

    def const(e: ir.Const) -> ir.Expr | None:
        return ir.Const(F32, float(np.float16(e.value))) if e.type == F16 else None

    def cast(e: ir.Cast) -> ir.Expr | None:
        return _round_f16(e.x) if e.type == F16 else None

    return PatternMatcher([(ir.Const, const), (ir.Cast, cast)]) + _retype(F16, F32)


def int64_as_int32(traits: TargetTraits) -> PatternMatcher:
    """i64 computed as i32 (tensors are range-checked on upload); constants beyond i32
    saturate (sentinels such as INT64_MAX) or refuse the kernel, as the target declares."""

    def const(e: ir.Const) -> ir.Expr | None:
        if e.type != I64:
            return None
        v = int(e.value)
        if not _I32_MIN <= v <= _I32_MAX:
            if traits.int64_constants == "error":
                raise KernelCompileError(
                    f"{traits.name} has no 64-bit integers: the constant {v} does not fit the "
                    f"int32 that {e.type} values are lowered to"
                )
            v = min(max(v, _I32_MIN), _I32_MAX)
        return ir.Const(I32, v)

    return PatternMatcher([(ir.Const, const)]) + _retype(I64, I32)


def c_remainder() -> PatternMatcher:
    """``a % b`` -> ``a - b * trunc(a / b)`` for float and signed operands."""

    def mod(e: ir.Binary) -> ir.Expr | None:
        if e.op != Op.MOD or not (e.type.is_float or e.type.is_signed):
            return None
        q: ir.Expr = ir.Binary(e.type, Op.DIV, e.a, e.b)
        if e.type.is_float:
            q = ir.Call(e.type, "trunc", (q,))
        return ir.Binary(e.type, Op.SUB, e.a, ir.Binary(e.type, Op.MUL, e.b, q))

    return PatternMatcher([(ir.Binary, mod)])


def nan_comparisons() -> PatternMatcher:
    """``a != b`` -> ``!(a == b)`` on floats, ``bool(x)`` -> a test of x's non-sign bits."""

    def ne(e: ir.Binary) -> ir.Expr | None:
        if e.op != Op.NE or not e.a.type.is_float:
            return None
        return ir.Unary(BOOL, Op.NOT, ir.Binary(BOOL, Op.EQ, e.a, e.b))

    def to_bool(e: ir.Cast) -> ir.Expr | None:
        if e.type != BOOL or not e.x.type.is_float:
            return None
        x = e.x if e.x.type == F32 else ir.Cast(F32, e.x)
        bits = ir.Binary(U32, Op.BITAND, ir.Bitcast(U32, x), ir.Const(U32, 0x7FFFFFFF))
        return ir.Binary(BOOL, Op.NE, bits, ir.Const(U32, 0))

    return PatternMatcher([(ir.Binary, ne), (ir.Cast, to_bool)])


def type_passes(traits: TargetTraits) -> PatternMatcher:
    pm = PatternMatcher()
    if not traits.f16_arithmetic:
        pm = pm + emulate_f16()
    if not traits.int64:
        pm = pm + int64_as_int32(traits)
    return pm


def target_fixes(traits: TargetTraits) -> PatternMatcher:
    pm = PatternMatcher()
    if not traits.c_remainder:
        pm = pm + c_remainder()
    if not traits.nan_comparisons:
        pm = pm + nan_comparisons()
    if traits.rules is not None:
        pm = pm + traits.rules
    return pm


def _round_returns(k: ir.KernelIR, storage_dtype: Callable[[DType], DType]) -> ir.KernelIR:
    """Emulated f16 results stored as f32 are rounded to their float16 value."""
    if k.output.type != F16 or storage_dtype(k.output.dtype) is DType.float16:
        return k

    def ret(s: ir.Return | ir.Store) -> ir.Stmt | None:
        v = s.value
        if isinstance(v, ir.Call) and v.fn == "round_f16":
            return None
        return dataclasses.replace(s, value=_round_f16(v))

    rounding = PatternMatcher([((ir.Return, ir.Store), ret)])
    return dataclasses.replace(k, body=rewrite_body(k.body, rounding))


Slots = tuple[tuple[tuple[int, int], ...], tuple[ir.BufferSpec, ...]]


def lower(
    k: ir.KernelIR,
    traits: TargetTraits,
    storage_dtype: Callable[[DType], DType] = lambda dt: dt,
    slots: Slots | None = None,
) -> ir.KernelIR:
    """``k`` ready for ``traits``' printer: types it has, its fixes, its polyfills attached,
    and with ``slots`` (where each input is read, the slots' specs) its inputs packed."""
    types, fixes = type_passes(traits), target_fixes(traits)
    lowered = rewrite_kernel(k, types)
    if not traits.f16_arithmetic:
        lowered = _round_returns(lowered, storage_dtype)
    lowered = rewrite_kernel(lowered, fixes)

    def prepare(f: ir.Function) -> ir.Function:  # a polyfill goes through the same passes
        f = dataclasses.replace(rewrite_function(f, types), ret=_lowered_type(f.ret, traits))
        return rewrite_function(f, fixes)

    functions = required_functions(lowered.body, traits.is_native, prepare=prepare)
    lowered = dataclasses.replace(lowered, functions=tuple(functions))
    return lowered if slots is None else pack_inputs(lowered, *slots)


def _lowered_type(t: ScalarType, traits: TargetTraits) -> ScalarType:
    if t == F16 and not traits.f16_arithmetic:
        return F32
    if t == I64 and not traits.int64:
        return I32
    return t


def pack_inputs(
    k: ir.KernelIR, where: tuple[tuple[int, int], ...], slots: tuple[ir.BufferSpec, ...]
) -> ir.KernelIR:
    """``k`` reading input ``i`` from slot ``where[i][0]`` at element offset ``where[i][1]``
    (``spawnml.kernel.slots``): its inputs become ``slots``."""

    def load(e: ir.Load) -> ir.Expr:
        slot, offset = where[e.buffer]
        index = e.index if not offset else ir.Binary(I32, Op.ADD, ir.Const(I32, offset), e.index)
        return ir.Load(e.type, slot, index)

    pm = PatternMatcher([(ir.Load, load)], once=True)
    return dataclasses.replace(rewrite_kernel(k, pm), inputs=slots)
