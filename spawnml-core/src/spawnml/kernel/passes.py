"""The core lowering pipeline: a specialised KernelIR -> the target-ready IR a printer prints.

Which passes run is decided by the target's :class:`~spawnml.kernel.traits.TargetTraits`:

1. types the target lacks: f16 computed as f32 (rounded with ``round_f16`` on every cast to
   f16 and on storing an f16 result into f32 storage), bf16 always computed as f32 (rounded
   with ``round_bf16``; read and written as its 16 bits where the backend stores it so, see
   ``bf16_memory``), i64 computed as i32 and u64 as u32;
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
from .rewrite import PatternMatcher, Rule, rewrite_body, rewrite_function, rewrite_kernel
from .traits import TargetTraits
from .types import ScalarType

F16, BF16, F32, I32, I64, U32, U64, BOOL = (
    ScalarType.f16, ScalarType.bf16, ScalarType.f32, ScalarType.i32, ScalarType.i64,
    ScalarType.u32, ScalarType.u64, ScalarType.bool,
)
_NARROWED = {I64: I32, U64: U32}
"""64-bit integer types and the 32-bit types they are computed as without int64."""


def _retype(src: ScalarType, dst: ScalarType) -> PatternMatcher:
    """Every value of type ``src`` becomes ``dst``; casts that become no-ops disappear."""

    def cast(e: ir.Cast) -> ir.Expr | None:
        if e.x.type == e.type:
            return e.x
        return dataclasses.replace(e, type=dst) if e.type == src else None

    def other(e: ir.Expr) -> ir.Expr | None:
        return dataclasses.replace(e, type=dst) if e.type == src else None

    return PatternMatcher([(ir.Cast, cast), (ir.Expr, other)])


def _rounded(fn: str, x: ir.Expr) -> ir.Call:
    """``fn`` (``round_f16``, ``round_bf16``) of ``x`` as f32: the nearest narrow value."""
    return ir.Call(F32, fn, (x if x.type == F32 else ir.Cast(F32, x),))


def _round_f16(x: ir.Expr) -> ir.Call:
    return _rounded("round_f16", x)


def _emulate_float(t: ScalarType, value: Callable[[float], float], fn: str) -> PatternMatcher:
    """A narrow float type ``t`` computed as f32: constants take their value of type ``t``
    (``value``), casts to ``t`` round with the polyfill ``fn``."""

    def const(e: ir.Const) -> ir.Expr | None:
        return ir.Const(F32, value(e.value)) if e.type == t else None

    def cast(e: ir.Cast) -> ir.Expr | None:
        return _rounded(fn, e.x) if e.type == t else None

    return PatternMatcher([(ir.Const, const), (ir.Cast, cast)]) + _retype(t, F32)


def emulate_f16() -> PatternMatcher:
    """f16 computed as f32: constants take their float16 value, casts to f16 round."""
    return _emulate_float(F16, lambda v: float(np.float16(v)), "round_f16")


def emulate_bf16() -> PatternMatcher:
    """bf16 computed as f32: constants take their bfloat16 value (ml_dtypes: nearest, ties
    to even), casts to bf16 round with ``round_bf16``."""
    bfloat16 = DType.bfloat16.numpy.type
    return _emulate_float(BF16, lambda v: float(bfloat16(v)), "round_bf16")


def int64_as_int32(traits: TargetTraits) -> PatternMatcher:
    """i64 computed as i32 and u64 as u32 (tensors are range-checked on upload); constants
    beyond the 32-bit type saturate (sentinels such as INT64_MAX) or refuse the kernel, as
    the target declares."""

    def const(e: ir.Const) -> ir.Expr | None:
        narrow = _NARROWED.get(e.type)
        if narrow is None:
            return None
        info = np.iinfo(narrow.numpy)
        lo, hi = int(info.min), int(info.max)
        v = int(e.value)
        if not lo <= v <= hi:
            if traits.int64_constants == "error":
                raise KernelCompileError(
                    f"{traits.name} has no 64-bit integers: the constant {v} does not fit the "
                    f"{narrow.numpy} that {e.type} values are lowered to"
                )
            v = min(max(v, lo), hi)
        return ir.Const(narrow, v)

    return PatternMatcher([(ir.Const, const)]) + _retype(I64, I32) + _retype(U64, U32)


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
    """The rewrites computing the types ``traits`` lacks with the types it has."""
    pm = PatternMatcher()
    if not traits.f16_arithmetic:
        pm = pm + emulate_f16()
    if not traits.bf16_arithmetic:
        pm = pm + emulate_bf16()
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


def bf16_in_bits(storage_dtype: Callable[[DType], DType]) -> bool:
    """Whether bfloat16 tensors are stored as their 16 bits (in uint16 words; otherwise
    they are stored as f32 holding bfloat16 values)."""
    storage = storage_dtype(DType.bfloat16)
    if storage is DType.uint16:
        return True
    if storage is DType.float32:
        return False
    raise KernelCompileError(f"bfloat16 tensors stored as {storage}: kernels read bfloat16 "
                             "only as uint16 bits or float32")


def bf16_memory(k: ir.KernelIR, storage_dtype: Callable[[DType], DType]) -> ir.KernelIR:
    """Reads and writes of bfloat16 tensors (their values computed as f32, ``emulate_bf16``).

    Stored as 16 bits: a read widens the bits (``bits << 16`` is the f32 of the same value),
    a result is stored as the bits of the nearest bfloat16 (``bf16_bits``, ties to even).
    Stored as f32: a result is rounded to its bfloat16 value (``round_bf16``)."""
    ins = [i for i, b in enumerate(k.inputs) if b.dtype is DType.bfloat16]
    out = k.output.dtype is DType.bfloat16
    if not ins and not out:
        return k
    bits = bf16_in_bits(storage_dtype)
    rules: list[Rule] = []
    if bits and ins:
        rules.append((ir.Load, lambda e: _widen_bf16(e) if e.buffer in ins else None))
    if out:
        fn = "bf16_bits" if bits else "round_bf16"
        rules.append(((ir.Return, ir.Store), lambda s: _store_bf16(s, fn)))
    return rewrite_kernel(k, PatternMatcher(rules, once=True))


def _widen_bf16(e: ir.Load) -> ir.Expr:
    """The f32 value of a bfloat16 read as its 16 bits."""
    word = ir.Cast(U32, dataclasses.replace(e, type=I32))
    return ir.Bitcast(F32, ir.Binary(U32, Op.SHL, word, ir.Const(U32, 16)))


def _store_bf16(s: ir.Return | ir.Store, fn: str) -> ir.Stmt | None:
    """A result stored as bfloat16: ``fn`` (its bits, or its rounded f32 value) of it."""
    v = s.value
    if isinstance(v, ir.Call) and v.fn == fn:
        return None
    return dataclasses.replace(s, value=ir.Call(I32 if fn == "bf16_bits" else F32, fn, (v,)))


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
    if not traits.bf16_arithmetic:
        lowered = bf16_memory(lowered, storage_dtype)
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
    if t == BF16 and not traits.bf16_arithmetic:
        return F32
    if t in _NARROWED and not traits.int64:
        return _NARROWED[t]
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
