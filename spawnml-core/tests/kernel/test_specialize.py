"""Specialisation: folding, caching, promotion of compile-time names, IR shape."""

from __future__ import annotations

from spawnml.kernel import Output, Tensor, cast, f32, ir, kernel
from spawnml.kernel.types import ScalarType
from spawnml.testing import suite_kernels as K

F32 = "float32"


def test_specialisations_are_cached_by_key():
    a = K.add_broadcast.specialize([((2, 3), F32), ((3,), F32)], ((2, 3), F32))
    b = K.add_broadcast.specialize([((2, 3), F32), ((3,), F32)], ((2, 3), F32))
    c = K.add_broadcast.specialize([((2, 3), F32), ((1, 3), F32)], ((2, 3), F32))
    assert a is b
    assert c is not a
    assert a.key != c.key


def test_shapes_and_constants_are_folded_into_the_ir():
    spec = K.transpose.specialize([((2, 3), F32)], ((3, 2), F32), perm=(1, 0))
    consts = {e.value for e in ir.all_exprs(spec.body) if isinstance(e, ir.Const)}
    assert 3 in consts  # x.strides[0] folded
    assert not any(isinstance(s, ir.For) for s in ir.walk_stmts(spec.body))  # static loop unrolled


def test_compile_time_if_keeps_only_the_branch_taken():
    spec = K.unary.specialize([((4,), F32)], ((4,), F32), op=7)
    calls = [e.fn for e in ir.all_exprs(spec.body) if isinstance(e, ir.Call)]
    assert calls == ["tanh"]


def test_accumulator_is_promoted_to_a_runtime_variable():
    spec = K.reduce.specialize([((3, 4), F32)], ((3,), F32), axis=1, op=0)
    loops = [s for s in ir.walk_stmts(spec.body) if isinstance(s, ir.For)]
    assert len(loops) == 1
    (assign,) = loops[0].body[-1:]
    assert isinstance(assign, ir.Assign) and assign.var.type == ScalarType.f32


def test_nonnegative_index_math_uses_plain_division_and_negative_uses_floordiv():
    spec = K.add_broadcast.specialize([((2, 3), F32), ((2, 1), F32)], ((2, 3), F32))
    ops = {e.op for e in ir.all_exprs(spec.body) if isinstance(e, ir.Binary)}
    calls = {e.fn for e in ir.all_exprs(spec.body) if isinstance(e, ir.Call)}
    assert "div" in ops and "floordiv" not in calls  # gid // 3 on a non-negative gid
    spec = K.index_math.specialize([((4,), F32)], ((4,), "int32"))
    calls = {e.fn for e in ir.all_exprs(spec.body) if isinstance(e, ir.Call)}
    assert {"floordiv", "floormod"} <= calls


def test_weak_literals_adopt_the_operand_type_for_f16():
    spec = K.leaky_relu.specialize([((4,), "float16")], ((4,), "float16"), alpha=0.5)
    types = {e.type for e in ir.all_exprs(spec.body) if isinstance(e, ir.Const) and e.type.is_float}
    assert types == {ScalarType.f16}


def test_kernel_ir_records_source_location():
    spec = K.relu.specialize([((4,), F32)], ((4,), F32))
    assert spec.source.endswith(f"suite_kernels.py:{K.relu.src.first_line}")
    assert spec.key.startswith("relu-")


def test_a_broadcast_between_equal_shapes_reads_at_the_output_index():
    """Equal sizes mean no broadcast: no per-element division or modulo is left to undo
    (before: one ``//`` and ``%`` per axis, which the cpu's LLVM could not fold back)."""

    def index_ops(a_shape, b_shape, out_shape):
        spec = K.add_broadcast.specialize([(a_shape, F32), (b_shape, F32)], (out_shape, F32))
        return {e.op for e in ir.all_exprs(spec.body) if isinstance(e, ir.Binary)} & {
            ir.Op.DIV, ir.Op.MOD}

    assert not index_ops((2, 3, 5), (2, 3, 5), (2, 3, 5))
    assert not index_ops((1, 3, 5), (3, 5), (1, 3, 5))  # leading 1s: still equal sizes
    assert ir.Op.DIV in index_ops((2, 3, 5), (3, 1), (2, 3, 5))  # a real broadcast


@kernel
def _named_flat(x: Tensor, out: Output):
    f = out.flat  # bound once, to a non-negative value
    g = out.flat
    g = g - 7  # bound twice: may be negative
    return x.flat[(f // 3) % 4] + cast(g // 3, f32)


def test_a_name_bound_once_to_a_non_negative_value_divides_plainly():
    spec = _named_flat.specialize([((12,), F32)], ((12,), F32))
    calls = [e.fn for e in ir.all_exprs(spec.body) if isinstance(e, ir.Call)]
    assert calls.count("floordiv") == 1  # g's; f // 3 and its % 4 are plain
    assert "floormod" not in calls
