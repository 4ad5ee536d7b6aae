#!/usr/bin/env python3
"""Regenerate the kernel-IR reference in docs/writing-a-backend.md (between the
``<!-- ir-table:start -->`` and ``<!-- ir-table:end -->`` markers).

    .venv/bin/python scripts/gen_ir_docs.py            # rewrite the section
    .venv/bin/python scripts/gen_ir_docs.py --check    # exit 1 if the file is stale

The tables come from the code: the node classes and their fields (``spawnml.kernel.ir``),
the operator enum ``ir.Op`` and its groups, the intrinsic table
(``spawnml.kernel.intrinsics.INTRINSICS``), the polyfills (``spawnml.kernel.polyfills.POLYFILLS``)
and each target's declared native intrinsics (its renderer's ``TargetTraits``; the example
backend's ``_native``). Only the one-line semantics of the operators and of the nodes without
a docstring are written here, and the script refuses to run when a node or an operator has
none. Needs the built-in backend packages installed (their renderers import without a
device). ``spawnml-core/tests/kernel/test_ir_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

from spawnml.kernel import ir
from spawnml.kernel.intrinsics import INTRINSICS
from spawnml.kernel.polyfills import POLYFILLS, function_name
from spawnml.kernel.traits import TargetTraits
from spawnml.kernel.types import ScalarType

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "writing-a-backend.md"
START = "<!-- ir-table:start -->"
END = "<!-- ir-table:end -->"
EXAMPLE_SRC = ROOT / "conformance" / "examples" / "spawnml-backend-example" / "src"

# One line per node class without a docstring of its own; for one with a docstring, what the
# line adds to it. The script stops when a node has neither.
NODE_NOTES: dict[str, str] = {
    "Const": "A literal of the node's type (NaN and +-inf included).",
    "Var": "A local variable or parameter, by name; locals start at zero.",
    "Unary": "`op x`, one of the unary operators below.",
    "Binary": "`a op b`; both operands have the same type (the IR never mixes types).",
    "Assign": "`var = value`.",
    "If": "Run `then` where `cond` (bool) holds, `orelse` elsewhere.",
    "Load": "The index may be out of range in the arm of a `Select` whose value is discarded: "
            "such a read must not fault (Wasm clamps it, the example clips it).",
    "Cast": "Out-of-range and NaN float->int conversions are unspecified (docs/kernels.md); "
            "to bool is `x != 0`; to f16 rounds to the nearest f16.",
    "BufferSpec": "One buffer. `dtype` is the **logical** dtype: the buffer holds "
                  "`backend.storage_dtype(dtype)` elements; `.type` is the compute type, "
                  "`.size` the element count.",
}

_SHIFT = ("amount in [0, bit width); other amounts are unspecified (C leaves them undefined, "
          "Wasm and WGSL mask them)")
# One line per operator: what every target must compute.
OP_SEMANTICS: dict[ir.Op, str] = {
    ir.Op.NEG: "`-x`; integers wrap (two's complement), floats flip the sign (NaN stays NaN)",
    ir.Op.NOT: "logical not of a bool",
    ir.Op.INVERT: "bitwise not `~x` of an integer",
    ir.Op.ADD: "`a + b`; integers wrap, floats are IEEE",
    ir.Op.SUB: "`a - b`; integers wrap, floats are IEEE",
    ir.Op.MUL: "`a * b`; integers wrap, floats are IEEE",
    ir.Op.DIV: "floats: IEEE `a / b`. Integers: C division, truncating toward zero, emitted only "
               "with a divisor that is never 0 (nor -1 when signed); Python `//` and division "
               "by zero arrive as the `floordiv`/`truncdiv` calls",
    ir.Op.MOD: "integers: C remainder (sign of the dividend), same divisor guarantee as `div`; "
               "Python `%` arrives as `floormod`, float `%` as `pymod`",
    ir.Op.BITAND: "bitwise and of integers (`&` on bools arrives as `and`)",
    ir.Op.BITOR: "bitwise or of integers (`|` on bools arrives as `or`)",
    ir.Op.BITXOR: "bitwise xor of integers (`^` on bools arrives as `ne`)",
    ir.Op.SHL: f"`a << b`, bits shifted out are lost; {_SHIFT}",
    ir.Op.SHR: f"`a >> b`, arithmetic for i32/i64, logical for u32; {_SHIFT}",
    ir.Op.AND: "logical and of bools; both sides may be evaluated (no side effects exist)",
    ir.Op.OR: "logical or of bools; both sides may be evaluated",
    ir.Op.LT: "`a < b`; false if either is NaN",
    ir.Op.LE: "`a <= b`; false if either is NaN",
    ir.Op.GT: "`a > b`; false if either is NaN",
    ir.Op.GE: "`a >= b`; false if either is NaN",
    ir.Op.EQ: "`a == b`; false if either is NaN",
    ir.Op.NE: "`a != b`; **true** if either is NaN (targets whose `!=` is ordered get a rewrite)",
}

# Operand and result types of each operator group of spawnml.kernel.ir.
GROUPS: list[tuple[str, tuple[ir.Op, ...], str, str, str]] = [
    ("UNARY_OPS", ir.UNARY_OPS, "Unary", "`neg`: int, float; `not`: bool; `invert`: int",
     "operand's"),
    ("ARITH_OPS", ir.ARITH_OPS, "Binary", "int or float (`mod`: int)", "operands'"),
    ("BIT_OPS", ir.BIT_OPS, "Binary", "int", "operands'"),
    ("LOGIC_OPS", ir.LOGIC_OPS, "Binary", "bool", "bool"),
    ("COMPARE_OPS", ir.COMPARE_OPS, "Binary", "int or float (`eq`/`ne`: also bool)", "bool"),
]

ALL_TYPES = tuple(t for t in ScalarType if t is not ScalarType.bool)


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    is_native: Callable[[str, ScalarType], bool]
    computes: tuple[ScalarType, ...]  # the types its calls can have after lowering
    note: str = ""


def _traits_target(traits: TargetTraits, note: str = "") -> Target:
    computes = tuple(
        t for t in ALL_TYPES
        if (t is not ScalarType.f16 or traits.f16_arithmetic)
        and (t is not ScalarType.bf16 or traits.bf16_arithmetic)
        and (t not in (ScalarType.i64, ScalarType.u64) or traits.int64)
    )
    return Target(traits.name, traits.is_native, computes, note)


def targets() -> list[Target]:
    """The built-in targets (from their renderers' declared traits) and the example backend."""
    from spawnml_backend_cpu.executor import NumpyRenderer

    out = [_traits_target(NumpyRenderer().traits)]
    for module, note in [
        ("spawnml_backend_opencl.renderer", "f16 with cl_khr_fp16"),
        ("spawnml_backend_cuda.renderer", ""),
        ("spawnml_backend_webgpu.renderer", "f16 with shader-f16"),
        ("spawnml_backend_webgl.renderer", ""),
        ("spawnml_backend_wasm.wat", ""),
    ]:
        out.append(_traits_target(importlib.import_module(module).TRAITS, note))
    if str(EXAMPLE_SRC) not in sys.path:
        sys.path.insert(0, str(EXAMPLE_SRC))
    interpreter = importlib.import_module("spawnml_backend_example.interpreter")
    out.append(Target("example", interpreter._native, ALL_TYPES))
    return out


def _one_line(text: str) -> str:
    first = inspect.cleandoc(text).split("\n\n")[0]
    return " ".join(first.split())


def _row(*cells: object) -> str:
    """A table row; ``|`` inside a cell (code spans included) is escaped for GFM."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _nodes(base: type) -> list[type]:
    return [c for c in vars(ir).values()
            if isinstance(c, type) and issubclass(c, base) and c is not base
            and c.__module__ == ir.__name__]


def _fields(cls: type, skip: tuple[str, ...] = ()) -> str:
    parts = [f"`{f.name}: {f.type}`" for f in dataclasses.fields(cls)
             if f.name not in skip and f.name not in ("key",)]
    return ", ".join(parts) or "(none)"


def _meaning(cls: type) -> str:
    own = cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(")  # not dataclass's
    parts = [_one_line(cls.__doc__)] if own and cls.__doc__ else []
    if cls.__name__ in NODE_NOTES:
        parts.append(NODE_NOTES[cls.__name__])
    if not parts:
        raise SystemExit(f"gen_ir_docs: ir.{cls.__name__} has neither a docstring nor a note")
    return " ".join(parts)


def node_table() -> list[str]:
    rows = ["| node | kind | operands | meaning |", "|---|---|---|---|"]
    for base, kind, skip in ((ir.Expr, "expression", ("type",)), (ir.Stmt, "statement", ("line",))):
        for cls in _nodes(base):
            rows.append(_row(f"`{cls.__name__}`", kind, _fields(cls, skip), _meaning(cls)))
    for cls in (ir.KernelIR, ir.BufferSpec, ir.Function):
        rows.append(_row(f"`{cls.__name__}`", "container", _fields(cls), _meaning(cls)))
    return rows


def op_table() -> list[str]:
    missing = [op.name for op in ir.Op if op not in OP_SEMANTICS]
    grouped = [op for _, ops, *_ in GROUPS for op in ops]
    if missing or sorted(grouped) != sorted(ir.Op):
        raise SystemExit(f"gen_ir_docs: describe every ir.Op (missing: {missing}) and its group")
    rows = ["| `op` | node | group | operand types | result type | semantics |",
            "|---|---|---|---|---|---|"]
    for group, ops, node, operands, result in GROUPS:
        for op in ops:
            rows.append(_row(f"`{op.value}`", f"`{node}`", f"`ir.{group}`", operands, result,
                             OP_SEMANTICS[op]))
    return rows


# Calls the core passes insert (never written in a kernel): their argument types and when.
INTERNAL_CALLS: dict[str, tuple[tuple[ScalarType, ...], str]] = {
    "round_f16": ((ScalarType.f32,), "inserted by the f16 pass on targets without f16 "
                                     "arithmetic (passes.py casts the argument to f32)"),
    "round_bf16": ((ScalarType.f32,), "inserted by the bf16 pass on casts to bf16 and on "
                                      "storing a bfloat16 result kept as f32"),
    "bf16_bits": ((ScalarType.f32,), "inserted by the bf16 pass on storing a bfloat16 result "
                                     "kept as its 16 bits (passes.bf16_memory)"),
}


def _accepted(fn: str) -> tuple[str, tuple[ScalarType, ...]]:
    if fn in INTRINSICS:
        spec = INTRINSICS[fn]
        return spec.accepts, tuple(t for t in ALL_TYPES if spec.accepts_type(t))
    if fn not in INTERNAL_CALLS:
        raise SystemExit(f"gen_ir_docs: polyfill {fn!r} is no intrinsic: add it to INTERNAL_CALLS")
    types = INTERNAL_CALLS[fn][0]
    return " ".join(map(str, types)), types


def _cell(target: Target, fn: str, types: tuple[ScalarType, ...]) -> str:
    types = tuple(t for t in types if t in target.computes) or types
    native = [t for t in types if target.is_native(fn, t)]
    if len(native) == len(types):
        return "native"
    if not native:
        return "polyfill"
    poly = [t for t in types if t not in native]
    return f"native {' '.join(map(str, native))}; polyfill {' '.join(map(str, poly))}"


def _polyfills(fn: str) -> str:
    out = []
    for (name, kind), helper in POLYFILLS.items():
        if name == fn:
            module = helper.fn.__module__.rsplit(".", 1)[-1]
            out.append(f"{kind}: `{module}.{helper.name}`")
    return "; ".join(out) or "none (every target has it)"


def call_table(tgts: list[Target]) -> list[str]:
    names = list(INTRINSICS) + sorted({n for n, _ in POLYFILLS} - set(INTRINSICS))
    rows = [_row("`fn`", "arity", "argument types", "result", "meaning",
                 *(t.name for t in tgts), "polyfill (kind: helper)"),
            "|" + "---|" * (6 + len(tgts))]
    for fn in names:
        accepts, types = _accepted(fn)
        if fn in INTRINSICS:
            spec = INTRINSICS[fn]
            arity, result, doc = spec.arity, spec.result, spec.doc
        else:  # inserted by the core passes, never written in a kernel
            helper = next(h for (n, _), h in POLYFILLS.items() if n == fn)
            arity, result = len(helper.signature.parameters), "same"
            doc = f"{_one_line(helper.fn.__doc__ or '')} Internal: {INTERNAL_CALLS[fn][1]}."
        rows.append(_row(f"`{fn}`", arity, accepts, result, doc,
                         *(_cell(t, fn, types) for t in tgts), _polyfills(fn)))
    return rows


def section() -> str:
    tgts = targets()
    notes = "; ".join(f"{t.name}: {t.note}" for t in tgts if t.note)
    lines = [
        START,
        "<!-- generated by scripts/gen_ir_docs.py from spawnml.kernel.ir, .intrinsics, "
        ".polyfills and the renderers' TargetTraits; do not edit by hand -->",
        "",
        "**Nodes** (every expression also has `type: ScalarType`, every statement `line: int`):",
        "",
        *node_table(),
        "",
        "**Operators** (`ir.Op`, the `op` of `Unary` and `Binary`; a `str` enum, so "
        "`e.op == \"add\"` works):",
        "",
        *op_table(),
        "",
        "**`Call.fn`**: the intrinsics (`spawnml.kernel.intrinsics.INTRINSICS`: result `same` is "
        "the argument type). A column says what each target declares native for the types it "
        "computes; for the rest the lowering passes add the polyfill, specialised per type as "
        "`ir.Function` named by `spawnml.kernel.polyfills.function_name(fn, type)` "
        f"(e.g. `{function_name('min', ScalarType.f32)}`) to `KernelIR.functions`. Targets without "
        f"f16 arithmetic compute f16 as f32, without int64 compute i64 as i32 ({notes}).",
        "",
        *call_table(tgts),
        END,
    ]
    return "\n".join(lines)


def replace_section(doc: str, new: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"gen_ir_docs: {DOC} has no {START} ... {END} markers")
    return pattern.sub(lambda _: new, doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args(argv)
    doc = DOC.read_text()
    updated = replace_section(doc, section())
    if args.check:
        if updated != doc:
            print(f"{DOC.relative_to(ROOT)} is stale: run scripts/gen_ir_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(updated)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
