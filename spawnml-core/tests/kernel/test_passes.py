"""The lowering pipeline: the operator enum, the visitor, the rewriter, the core passes chosen
by TargetTraits, slot assignment and the Backend.compile template."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from spawnml.backend import Backend, Capabilities
from spawnml.dtypes import DType
from spawnml.errors import KernelCompileError
from spawnml.kernel import Output, Tensor, cast, f16, f32, ir, kernel
from spawnml.kernel.analysis import calls, nonneg, strides, trip_count, uses_type
from spawnml.kernel.ir import Op
from spawnml.kernel.passes import lower, pack_inputs
from spawnml.kernel.render import Renderer
from spawnml.kernel.rewrite import PatternMatcher, rewrite
from spawnml.kernel.slots import assign_slots
from spawnml.kernel.traits import TargetTraits, kinds
from spawnml.kernel.types import ScalarType as T
from spawnml.kernel.visitor import Visitor

I32 = T.i32


def c(v: int, t: T = I32) -> ir.Const:
    return ir.Const(t, v)


# ----------------------------------------------------------------------------- IR and walkers


def test_operators_are_an_enum_that_still_compares_and_prints_as_strings():
    e = ir.Binary(I32, "add", c(1), c(2))  # a plugin spelling the old string
    assert e.op is Op.ADD and e.op == "add" and f"{e.op}" == "add"
    assert {"add": 1}[e.op] == 1
    assert "op='add'" in repr(e)  # kernel fingerprints are unchanged


def test_visitor_dispatches_on_the_node_class_and_names_what_it_lacks():
    class Count(Visitor):
        def visit_Const(self, e: ir.Const) -> int:
            return 1

        def visit_Binary(self, e: ir.Binary) -> int:
            return 1 + self.visit(e.a) + self.visit(e.b)

    assert Count().visit(ir.Binary(I32, Op.ADD, c(1), ir.Binary(I32, Op.MUL, c(2), c(3)))) == 5
    with pytest.raises(NotImplementedError, match="Count: Var"):
        Count().visit(ir.Var(I32, "x"))


def test_rewriter_applies_rules_bottom_up_to_a_fixed_point():
    # x * 2 -> x + x, and 0 + y -> y: the second fires on what the first produced
    def double(e: ir.Binary) -> ir.Expr | None:
        if e.op == Op.MUL and e.b == c(2):
            return ir.Binary(e.type, Op.ADD, e.a, e.a)
        return None

    def zero_plus(e: ir.Binary) -> ir.Expr | None:
        return e.b if e.op == Op.ADD and e.a == c(0) else None

    pm = PatternMatcher([(ir.Binary, double), (ir.Binary, zero_plus)])
    x = ir.Var(I32, "x")
    e = ir.Binary(I32, Op.ADD, c(0), ir.Binary(I32, Op.MUL, x, c(2)))
    assert rewrite(e, pm) == ir.Binary(I32, Op.ADD, x, x)
    s = ir.Return(1, ir.Binary(I32, Op.MUL, ir.Binary(I32, Op.MUL, x, c(2)), c(2)))
    xx = ir.Binary(I32, Op.ADD, x, x)
    assert rewrite(s, pm) == ir.Return(1, ir.Binary(I32, Op.ADD, xx, xx))


def test_shared_analyses():
    assert strides((2, 3, 4)) == [12, 4, 1]
    assert trip_count(0, 10, 3) == 4 and trip_count(5, 0, 1) == 0 and trip_count(5, 0, -2) == 3
    g = ir.Var(I32, "o0")
    assert nonneg(ir.Binary(I32, Op.MOD, ir.GlobalIndex(I32), c(3)))
    assert nonneg(g, {"o0"}) and not nonneg(g)
    assert not nonneg(ir.Binary(I32, Op.SUB, ir.GlobalIndex(I32), c(3)))


# ----------------------------------------------------------------------------- traits and passes


def test_one_intrinsic_table_most_specific_kind_first():
    traits = TargetTraits("t", intrinsics={
        ("abs", "any"): "any", ("abs", "int"): "int", ("abs", "i32"): "i32",
        ("min", "float"): "fmin",
    })
    assert kinds(T.u32) == ["u32", "unsigned", "int", "num", "any"]
    assert traits.native("abs", T.i32) == "i32" and traits.native("abs", T.u32) == "int"
    assert traits.native("abs", T.f32) == "any"
    assert traits.native("min", T.f16) == "fmin" and not traits.is_native("min", T.i32)


@kernel
def half_math(x: Tensor, out: Output):
    v = cast(x.flat[out.flat], f16)
    return v * cast(0.1, f16) + cast(math.inf, f16)


def _storage_f32(dt: DType) -> DType:
    return DType.float32 if dt is DType.float16 else dt


def test_f16_emulation_is_one_pass_for_every_target_without_f16():
    k = half_math.specialize([((4,), "float32")], ((4,), "float16"))
    native = lower(k, TargetTraits("t"))
    assert uses_type(native, T.f16) and not calls(native, "round_f16")
    emulated = lower(k, TargetTraits("t", f16_arithmetic=False), _storage_f32)
    assert not uses_type(emulated, T.f16)
    consts = [e for e in ir.all_exprs(emulated.body) if isinstance(e, ir.Const) and e.type.is_float]
    assert float(np.float16(0.1)) in [e.value for e in consts]  # f16 constants keep their value
    last = emulated.body[-1]
    assert isinstance(last, ir.Return) and last.value.fn == "round_f16"  # rounded on store
    # f16 stored as 16 bits: the store itself rounds, the pass does not round again
    stored = lower(k, TargetTraits("t", f16_arithmetic=False))
    assert not (isinstance(stored.body[-1].value, ir.Call)
                and stored.body[-1].value.fn == "round_f16")


@kernel
def big_constant(x: Tensor, out: Output):
    return min(x.flat[out.flat], 9223372036854775807)


def test_int64_lowers_to_int32_with_saturated_or_refused_constants():
    k = big_constant.specialize([((4,), "int64")], ((4,), "int64"))
    low = lower(k, TargetTraits("t", int64=False))
    assert not uses_type(low, T.i64)
    assert max(e.value for e in ir.all_exprs(low.body) if isinstance(e, ir.Const)) == 2**31 - 1
    with pytest.raises(KernelCompileError, match="t has no 64-bit integers"):
        lower(k, TargetTraits("t", int64=False, int64_constants="error"))


def test_target_fixes_c_remainder_and_nan_comparisons():
    x, y = ir.Var(T.f32, "x"), ir.Var(T.f32, "y")
    body = (ir.Return(1, ir.Binary(T.bool, Op.NE, x, y)),)
    k = ir.KernelIR("k", (), ir.BufferSpec("out", DType.bool, (1,)), (x, y), body)
    fixed = lower(k, TargetTraits("t", nan_comparisons=False))
    assert fixed.body[0].value == ir.Unary(T.bool, Op.NOT, ir.Binary(T.bool, Op.EQ, x, y))
    i = ir.Var(I32, "i")
    body = (ir.Return(1, ir.Binary(I32, Op.MOD, i, c(3))),)
    k = ir.KernelIR("k", (), ir.BufferSpec("out", DType.int32, (1,)), (i,), body)
    fixed = lower(k, TargetTraits("t", c_remainder=False))
    assert fixed.body[0].value == ir.Binary(
        I32, Op.SUB, i, ir.Binary(I32, Op.MUL, c(3), ir.Binary(I32, Op.DIV, i, c(3)))
    )


@kernel
def nan_safe_max(x: Tensor, out: Output):
    return max(x.flat[out.flat], 0.0)


def test_polyfills_are_expanded_before_printing():
    k = nan_safe_max.specialize([((4,), "float32")], ((4,), "float32"))
    assert k.functions == ()
    lowered = lower(k, TargetTraits("t"))
    assert [f.name for f in lowered.functions][-1] == "sp_max_f32"
    assert lower(k, TargetTraits("t", intrinsics={("max", "float"): "fmax"})).functions == ()


def test_inputs_packed_into_slots():
    x = ir.Load(T.f32, 1, ir.GlobalIndex(I32))
    k = ir.KernelIR("k", (ir.BufferSpec("a", DType.float32, (4,)),) * 2,
                    ir.BufferSpec("out", DType.float32, (4,)), (), (ir.Return(1, x),))
    slot = (ir.BufferSpec("in0", DType.float32, (8,)),)
    packed = pack_inputs(k, ((0, 0), (0, 4)), slot)
    assert packed.inputs == slot
    assert packed.body[0].value == ir.Load(
        T.f32, 0, ir.Binary(I32, Op.ADD, c(4), ir.GlobalIndex(I32))
    )


def test_slot_assignment_keeps_what_fits_direct_and_packs_the_rest_by_group():
    assert assign_slots([3, 5], ["f", "f"], 4).where == ((0, 0), (1, 0))
    # WebGL: one group of words, one unit: everything packed
    one = assign_slots([3, 5, 2], [0, 0, 0], 1)
    assert one.direct == 0 and one.where == ((0, 0), (0, 3), (0, 8))
    # WebGPU: 3 slots, two storage types in the tail -> one input direct
    mixed = assign_slots([4, 4, 4, 4], ["f", "f", "i", "f"], 3)
    assert mixed.direct == 1 and mixed.where == ((0, 0), (1, 0), (2, 0), (1, 4))
    assert mixed.members(1) == [(1, 0), (3, 4)]
    with pytest.raises(KernelCompileError, match="cannot share a slot"):
        assign_slots([1, 1, 1], ["a", "b", "c"], 2)


# ----------------------------------------------------------------------------- Backend.compile


class _Printer(Renderer):
    name = "printer"

    def print_kernel(self, k: ir.KernelIR) -> str:
        return f"{k.name}: {len(k.functions)} functions"


class _Templated(Backend):
    """A backend that supplies only ``build``: the template does the rest."""

    name = "templated"
    source_suffix = "src"

    def __init__(self) -> None:
        self.renderer = _Printer()
        self.built: list[str] = []

    @classmethod
    def probe(cls) -> Any:  # pragma: no cover - not used
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(frozenset({DType.float32}), extras={"max_loop_iterations": 10})

    def build(self, kernel: ir.KernelIR, source: str, renderer: Renderer) -> str:
        self.built.append(source)
        return source

    def launch(self, *args: Any) -> None:  # pragma: no cover - not used
        raise NotImplementedError

    _allocate = _release = _write = _read = launch  # type: ignore[assignment]


@kernel
def looped(x: Tensor, out: Output, n: int):
    acc = 0.0
    for j in range(n):
        acc = acc + x.flat[j]
    return max(acc, 0.0)


def test_compile_template_caches_checks_limits_renders_dumps_and_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("SPAWNML_DUMP_KERNELS", str(tmp_path))
    b = _Templated()
    k = looped.specialize([((8,), "float32")], ((1,), "float32"), n=8)
    assert b.compile(k) == "looped: 2 functions" and b.compile(k) is b.compile(k)
    assert len(b.built) == 1
    assert (tmp_path / "templated" / f"{k.key}.src").read_text() == "looped: 2 functions"
    with pytest.raises(KernelCompileError, match="loop iterations"):
        b.compile(looped.specialize([((8,), "float32")], ((1,), "float32"), n=11))


def test_renderers_lower_before_printing():
    k = half_math.specialize([((4,), "float32")], ((4,), "float16"))
    r = _Printer(_storage_f32)
    r.traits = dataclasses.replace(r.traits, f16_arithmetic=False)
    assert not uses_type(r.lower(k), T.f16)
    assert r.functions(k) == list(r.lower(k).functions)
    assert f32 is T.f32


def test_renderers_declaring_natives_the_old_way_keep_them():
    class Old(Renderer):
        name = "old"
        native_intrinsics = frozenset({"exp"})
        native_for = {"sqrt": frozenset({"float"})}  # noqa: RUF012

    assert Old().is_native("exp", T.i32) and Old().is_native("sqrt", T.f32)
    assert not Old().is_native("sqrt", T.i32) and not Renderer().is_native("exp", T.f32)
