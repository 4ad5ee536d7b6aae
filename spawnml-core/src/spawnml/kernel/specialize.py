"""Specialisation: a parsed kernel + concrete shapes, dtypes and constants -> typed IR.

Compile-time values (Python ints, floats, bools, tuples, tensor shapes) are folded as the
tree is walked; ``static_range`` loops are unrolled and ``if`` on a compile-time condition
keeps only the branch taken. Everything else becomes typed IR. A name bound to a
compile-time value that is reassigned inside a runtime loop or branch is promoted to a
runtime variable (the walk restarts with that name marked runtime).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DType, dtype as as_dtype
from ..errors import InvalidInputError, KernelSyntaxError, KernelTypeError
from . import ir
from .frontend import Helper, Kernel, _Source
from .intrinsics import INTRINSICS
from .types import ScalarType, compute_type, scalar_type_of

_MAX_UNROLL = 4096
_I32 = (-(2**31), 2**31 - 1)


class _Promote(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


@dataclass(frozen=True)
class _TensorRef:
    slot: int
    spec: ir.BufferSpec
    is_output: bool = False

    @property
    def strides(self) -> tuple[int, ...]:
        strides, acc = [], 1
        for d in reversed(self.spec.shape):
            strides.append(acc)
            acc *= d
        return tuple(reversed(strides))


@dataclass(frozen=True)
class _Flat:
    tensor: _TensorRef


class _MathModule:
    pass


_MATH = _MathModule()
_PY_SCALAR = (bool, int, float)
_MATH_ALIASES = {"fabs": "abs"}


def _is_const(v: Any) -> bool:
    return isinstance(v, _PY_SCALAR) and not isinstance(v, np.generic)


def _spec_of(name: str, value: Any) -> tuple[tuple[int, ...], DType]:
    if isinstance(value, tuple) and len(value) == 2 and not hasattr(value, "shape"):
        shape, dt = value
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        shape, dt = value.shape, value.dtype
    else:
        raise InvalidInputError(f"{name}: expected (shape, dtype) or an array-like; got {value!r}")
    return tuple(int(d) for d in shape), as_dtype(dt)


class _Scope:
    """Name bindings of one kernel or one inlined helper call."""

    def __init__(self, src: _Source, prefix: str) -> None:
        self.src = src
        self.prefix = prefix
        self.env: dict[str, Any] = {}

    def key(self, name: str) -> str:
        return self.prefix + name


class _Specializer:
    def __init__(
        self,
        k: Kernel,
        inputs: list[ir.BufferSpec],
        output: ir.BufferSpec,
        consts: dict[str, Any],
        runtime_names: set[str],
    ) -> None:
        self.kernel = k
        self.inputs = inputs
        self.output = output
        self.runtime_names = runtime_names
        self.locals: dict[str, ir.Var] = {}
        self.nonneg: set[str] = set()
        self.loop_vars: set[str] = set()
        self.depth = 0  # nesting of runtime control flow
        self.blocks: list[list[ir.Stmt]] = [[]]
        self.helper_stack: list[Helper] = []
        self.call_counter = 0
        self.scope = _Scope(k.src, "")
        out_ref = _TensorRef(-1, output, is_output=True)
        slots = iter(range(len(inputs)))
        for name, kind in k.kinds.items():
            if kind == "tensor":
                slot = next(slots)
                self.scope.env[name] = _TensorRef(slot, inputs[slot])
            elif kind == "output":
                self.scope.env[name] = out_ref
            else:
                self.scope.env[name] = consts[name]
        self.out_ref = out_ref
        self.index_vars: list[ir.Var] | None = None
        self._prologue: list[ir.Assign] = []
        self._frames: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ helpers
    @property
    def src(self) -> _Source:
        return self.scope.src

    def err(self, node: ast.AST, msg: str, cls: type[Exception] = KernelTypeError) -> Exception:
        return self.src.error(node, msg, cls)

    def emit(self, stmt: ir.Stmt) -> None:
        self.blocks[-1].append(stmt)

    def new_var(self, base: str, t: ScalarType) -> ir.Var:
        name = f"v_{base}"
        n = 1
        while name in self.locals and self.locals[name].type != t:
            n += 1
            name = f"v_{base}_{n}"
        var = ir.Var(t, name)
        self.locals[name] = var
        return var

    def temp(self, base: str, value: ir.Expr, line: int) -> ir.Expr:
        if isinstance(value, ir.Const | ir.Var | ir.GlobalIndex):
            return value
        var = ir.Var(value.type, f"t{len(self.locals)}_{base}")
        self.locals[var.name] = var
        self.emit(ir.Assign(line, var, value))
        if self.is_nonneg(value):
            self.nonneg.add(var.name)
        return var

    def materialize(self, v: Any, node: ast.AST, want: ScalarType | None = None) -> ir.Expr:
        """A compile-time scalar as a typed constant (or check a runtime value)."""
        if isinstance(v, ir.Expr):
            if want is not None and v.type != want:
                raise self.err(
                    node,
                    f"expected a value of type {want}, found {v.type}; "
                    f"convert with cast(value, {want})",
                )
            return v
        if not _is_const(v):
            raise self.err(node, f"{_describe(v)} is not a scalar value")
        if isinstance(v, bool):
            t = want or ScalarType.bool
            if t != ScalarType.bool:
                raise self.err(node, f"expected {t}, found a bool; use cast(x, {t})")
            return ir.Const(t, v)
        if isinstance(v, int):
            t = want or ScalarType.i32
            if t == ScalarType.bool:
                raise self.err(node, "expected a bool, found an integer; compare explicitly")
            if t.is_float:
                return ir.Const(t, float(v))
            lo, hi = {
                ScalarType.i32: _I32,
                ScalarType.u32: (0, 2**32 - 1),
                ScalarType.i64: (-(2**63), 2**63 - 1),
            }[t]
            if not lo <= v <= hi:
                raise self.err(node, f"integer constant {v} does not fit in {t}")
            return ir.Const(t, v)
        t = want or ScalarType.f32
        if not t.is_float:
            raise self.err(
                node,
                f"expected {t}, found the float constant {v!r}; cast explicitly "
                "or use an integer literal",
            )
        return ir.Const(t, float(v))

    def unify(self, a: Any, b: Any, node: ast.AST, what: str) -> tuple[ir.Expr, ir.Expr]:
        ta = a.type if isinstance(a, ir.Expr) else None
        tb = b.type if isinstance(b, ir.Expr) else None
        if ta is None and tb is None:
            return self.materialize(a, node), self.materialize(b, node)
        if ta is None:
            return self.materialize(a, node, tb), b
        if tb is None:
            return a, self.materialize(b, node, ta)
        if ta != tb:
            raise self.err(
                node,
                f"operands of {what} have types {ta} and {tb}; convert one "
                f"explicitly, e.g. cast(x, {ta})",
            )
        return a, b

    def is_nonneg(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Const):
            return e.type != ScalarType.bool and e.value >= 0
        if isinstance(e, ir.GlobalIndex):
            return True
        if isinstance(e, ir.Var):
            return e.name in self.nonneg
        if e.type == ScalarType.u32:
            return True
        if isinstance(e, ir.Binary) and e.op in ("add", "mul", "div", "mod", "bitand", "shr"):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, ir.Call) and e.fn in ("min", "max", "floordiv", "floormod"):
            if e.fn == "max":
                return any(self.is_nonneg(a) for a in e.args)
            return all(self.is_nonneg(a) for a in e.args)
        if (
            isinstance(e, ir.Cast)
            and isinstance(e.x.type, ScalarType)
            and e.x.type == ScalarType.bool
        ):
            return True
        return False

    # ------------------------------------------------------------------ entry
    def run(self) -> tuple[tuple[ir.Var, ...], tuple[ir.Stmt, ...]]:
        body = _body_without_docstring(self.kernel.src.tree)
        self.block(body)
        stmts = self.blocks[0]
        if not _always_returns(stmts):
            raise self.kernel.src.error(
                self.kernel.src.tree,
                "the kernel may finish without returning a value; every path must end in "
                "'return <output element>'",
                KernelSyntaxError,
            )
        prologue = [s for s in self._index_prologue()]
        used = {e.name for e in ir.all_exprs(tuple(stmts)) if isinstance(e, ir.Var)}
        prologue = [s for s in prologue if s.var.name in used]
        keep = used | {
            s.var.name for s in ir.walk_stmts(tuple(stmts)) if isinstance(s, ir.Assign | ir.For)
        }
        local_vars = tuple(v for n, v in self.locals.items() if n in keep)
        return local_vars, tuple(prologue + stmts)

    def _index_prologue(self) -> list[ir.Assign]:
        return list(self._prologue) if self.index_vars is not None else []

    def output_index(self) -> list[ir.Var]:
        if self.index_vars is None:
            shape = self.output.shape
            strides = _TensorRef(-1, self.output).strides
            self.index_vars, self._prologue = [], []
            gid = ir.GlobalIndex(ScalarType.i32)
            for d, (n, s) in enumerate(zip(shape, strides)):
                var = ir.Var(ScalarType.i32, f"o{d}")
                self.locals[var.name] = var
                self.nonneg.add(var.name)
                e: ir.Expr = gid
                if s != 1:
                    e = self.binop_int("div", e, ir.Const(ScalarType.i32, s))
                if d > 0 and n != 1:
                    e = self.binop_int("mod", e, ir.Const(ScalarType.i32, n))
                if n == 1:
                    e = ir.Const(ScalarType.i32, 0)
                self._prologue.append(ir.Assign(self.kernel.src.first_line, var, e))
                self.index_vars.append(var)
        return self.index_vars

    # ------------------------------------------------------------------ statements
    def block(self, stmts: Sequence[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)
            if not self.helper_stack and _always_returns(self.blocks[-1][-1:]):
                return  # the rest of the block is unreachable

    def stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.err(
                node,
                f"'{type(node).__name__}' is not part of the kernel language",
                KernelSyntaxError,
            )
        method(node)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return
        raise self.err(node, "an expression statement has no effect", KernelSyntaxError)

    def stmt_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        value = self.expr(node.value)
        self.assign_target(target, value, node)

    def assign_target(self, target: ast.expr, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple):
            if not isinstance(value, tuple):
                raise self.err(
                    node,
                    f"cannot unpack {_describe(value)}; only tuples "
                    "(out.index, x.shape, (a, b)) can be unpacked",
                )
            if len(value) != len(target.elts):
                raise self.err(
                    node, f"cannot unpack {len(value)} values into {len(target.elts)} names"
                )
            for t, v in zip(target.elts, value):
                self.assign_target(t, v, node)
            return
        assert isinstance(target, ast.Name)
        self.assign(target.id, value, node)

    def assign(self, name: str, value: Any, node: ast.AST) -> None:
        env = self.scope.env
        key = self.scope.key(name)
        cur = env.get(name)
        line = self.src.line(node)
        if isinstance(cur, ir.Var) and cur.name in self.loop_vars:
            raise self.err(node, f"cannot assign to the loop variable {name!r}", KernelSyntaxError)
        if isinstance(cur, _TensorRef):
            raise self.err(node, f"cannot assign to tensor parameter {name!r}", KernelSyntaxError)
        scalar = isinstance(value, ir.Expr) or _is_const(value)
        if not scalar:
            if self.depth > 0 and (name in env):
                raise self.err(
                    node,
                    f"cannot rebind {name!r} to {_describe(value)} inside a runtime loop or branch",
                )
            env[name] = value
            return
        if isinstance(cur, ir.Var):
            self.emit(ir.Assign(line, cur, self.materialize(value, node, cur.type)))
            self.nonneg.discard(cur.name)
            return
        runtime = isinstance(value, ir.Expr) or key in self.runtime_names or self.depth > 0
        if not runtime:
            env[name] = value
            return
        if self.depth > 0 and cur is not None and key not in self.runtime_names:
            raise _Promote(key)
        e = self.materialize(value, node)
        var = self.new_var(self.scope.prefix + name, e.type)
        env[name] = var
        self.emit(ir.Assign(line, var, e))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        assert isinstance(node.target, ast.Name)
        current = self.load_name(node.target.id, node.target)
        value = self.binop(node.op, current, self.expr(node.value), node)
        self.assign(node.target.id, value, node)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        if _is_const(cond):
            self.block(node.body if cond else node.orelse)
            return
        if not isinstance(cond, ir.Expr) or cond.type != ScalarType.bool:
            raise self.err(
                node.test,
                f"an if condition must be a bool, found {_describe(cond)}; "
                "compare explicitly (x != 0)",
            )
        then = self.sub_block(node.body)
        orelse = self.sub_block(node.orelse)
        self.emit(ir.If(self.src.line(node), cond, tuple(then), tuple(orelse)))

    def sub_block(self, stmts: Sequence[ast.stmt]) -> list[ir.Stmt]:
        self.blocks.append([])
        self.depth += 1
        try:
            self.block(stmts)
        finally:
            self.depth -= 1
        return self.blocks.pop()

    def stmt_For(self, node: ast.For) -> None:
        assert isinstance(node.target, ast.Name)
        name = node.target.id
        it = node.iter
        if (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id in ("range", "static_range")
        ):
            args = [self.expr(a) for a in it.args]
            if it.func.id == "static_range":
                if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                    raise self.err(
                        it,
                        "static_range bounds must be compile-time integers; found "
                        + ", ".join(_describe(a) for a in args),
                    )
                self.unroll(name, list(range(*args)), node)
                return
            self.runtime_loop(name, args, node)
            return
        seq = self.expr(it)
        if not isinstance(seq, tuple):
            raise self.err(
                it,
                f"for loops iterate over range(...), static_range(...) or a "
                f"compile-time tuple; found {_describe(seq)}",
                KernelSyntaxError,
            )
        self.unroll(name, list(seq), node)

    def unroll(self, name: str, values: list[Any], node: ast.For) -> None:
        if len(values) > _MAX_UNROLL:
            raise self.err(
                node,
                f"static loop of {len(values)} iterations exceeds the unroll "
                f"limit of {_MAX_UNROLL}; use range()",
            )
        for v in values:
            self.scope.env[name] = v
            self.block(node.body)

    def runtime_loop(self, name: str, args: list[Any], node: ast.For) -> None:
        if len(args) == 1:
            start, stop, step = 0, args[0], 1
        elif len(args) == 2:
            (start, stop), step = args, 1
        else:
            start, stop, step = args
        if not (isinstance(step, int) and not isinstance(step, bool)) or step == 0:
            raise self.err(
                node.iter,
                f"the range step must be a non-zero compile-time integer; found {_describe(step)}",
            )
        line = self.src.line(node)
        bounds = []
        for label, b in (("start", start), ("stop", stop)):
            e = self.materialize(b, node.iter)
            if e.type not in (ScalarType.i32,):
                raise self.err(node.iter, f"range {label} must be an i32, found {e.type}")
            bounds.append(self.temp(label, e, line))
        var = self.new_var(self.scope.prefix + name, ScalarType.i32)
        if self.is_nonneg(bounds[0]) and step > 0:
            self.nonneg.add(var.name)
        self.loop_vars.add(var.name)
        self.scope.env[name] = var
        body = self.sub_block(node.body)
        self.emit(ir.For(line, var, bounds[0], bounds[1], step, tuple(body)))

    def stmt_Return(self, node: ast.Return) -> None:
        assert node.value is not None
        value = self.expr(node.value)
        if self.helper_stack:
            self.helper_return(value, node)
            return
        want = self.output.type
        if isinstance(value, ir.Expr) and value.type != want:
            raise self.err(
                node,
                f"the kernel returns {value.type} but the output "
                f"{self.kernel.output_name!r} is {self.output.dtype} (kernel type "
                f"{want}); convert with cast(value, {self.kernel.output_name}.dtype)",
            )
        self.emit(ir.Return(self.src.line(node), self.materialize(value, node, want)))

    # ------------------------------------------------------------------ helpers (inlining)
    def helper_return(self, value: Any, node: ast.AST) -> None:
        frame = self._frames[-1]
        if frame["var"] is None:
            if self.depth > frame["depth"]:
                raise _Promote(frame["key"])
            frame["value"] = value
            return
        var = frame["var"]
        if var == "pending":
            e = self.materialize(value, node)
            var = frame["var"] = ir.Var(e.type, f"r{len(self.locals)}_{frame['name']}")
            self.locals[var.name] = var
        self.emit(ir.Assign(self.src.line(node), var, self.materialize(value, node, var.type)))

    def call_helper(self, h: Helper, args: list[Any], node: ast.Call) -> Any:
        if any(h is other for other in self.helper_stack):
            chain = " -> ".join(x.name for x in [*self.helper_stack, h])
            raise self.err(node, f"recursion is not allowed ({chain})", KernelSyntaxError)
        params = list(h.signature.parameters.values())
        if len(args) > len(params):
            raise self.err(
                node, f"helper {h.name!r} takes {len(params)} arguments, got {len(args)}"
            )
        self.call_counter += 1
        key = f"ret{self.call_counter}:"
        scope = _Scope(h.src, f"{self.scope.prefix}{h.name}{self.call_counter}_")
        line = self.src.line(node)
        for p, a in zip(params, args):
            if isinstance(a, ir.Expr):
                a = self.temp(p.name, a, line)
            scope.env[p.name] = a
        for p in params[len(args) :]:
            if p.default is p.empty:
                raise self.err(node, f"helper {h.name!r} is missing argument {p.name!r}")
            scope.env[p.name] = p.default
        frame = {
            "name": h.name,
            "key": key,
            "depth": self.depth,
            "var": "pending" if key in self.runtime_names else None,
            "value": None,
        }
        self._frames.append(frame)
        saved = self.scope
        self.scope = scope
        self.helper_stack.append(h)
        try:
            self.block(_body_without_docstring(h.src.tree))
        finally:
            self.helper_stack.pop()
            self.scope = saved
            self._frames.pop()
        if frame["var"] is None:
            if frame["value"] is None:
                raise h.src.error(
                    h.src.tree, "the helper did not return a value", KernelSyntaxError
                )
            return frame["value"]
        if frame["var"] == "pending":
            raise h.src.error(h.src.tree, "the helper did not return a value", KernelSyntaxError)
        return frame["var"]

    # ------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.err(
                node,
                f"'{type(node).__name__}' is not part of the kernel language",
                KernelSyntaxError,
            )
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.expr(e) for e in node.elts)

    def expr_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def load_name(self, name: str, node: ast.AST) -> Any:
        if name in self.scope.env:
            return self.scope.env[name]
        found, value = self.src.lookup_global(name)
        if not found:
            raise self.err(node, f"name {name!r} is not defined", KernelSyntaxError)
        if name == "math" or value is math:
            return _MATH
        if isinstance(value, ScalarType | Helper) or _is_const(value):
            return value
        if isinstance(value, DType):
            t = compute_type(value)
            if t is None:
                raise self.err(node, f"{value} is not a kernel type")
            return t
        if isinstance(value, tuple) and all(_is_const(v) for v in value):
            return value
        if value in (min, max, abs, float, int, bool, len):
            return value
        raise self.err(
            node,
            f"name {name!r} refers to {_describe(value)}, which kernels cannot "
            "use (allowed: numbers, bools, tuples of them, types, @helper functions)",
            KernelSyntaxError,
        )

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if base is _MATH:
            consts = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}
            if attr in consts:
                return consts[attr]
            raise self.err(node, f"math.{attr} must be called", KernelSyntaxError)
        if isinstance(base, _TensorRef):
            spec = base.spec
            if attr == "shape":
                return spec.shape
            if attr == "ndim":
                return len(spec.shape)
            if attr == "size":
                return spec.size
            if attr == "strides":
                return base.strides
            if attr == "dtype":
                return spec.type
            if attr == "flat":
                if base.is_output:
                    return ir.GlobalIndex(ScalarType.i32)
                return _Flat(base)
            if attr == "index" and base.is_output:
                return tuple(self.output_index())
        raise self.err(node, f"{_describe(base)} has no attribute {attr!r}", KernelSyntaxError)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(node.slice, ast.Slice):
            if not isinstance(base, tuple):
                raise self.err(
                    node, f"slicing is only allowed on compile-time tuples, not {_describe(base)}"
                )
            parts = [
                None if p is None else self.expr(p)
                for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if not all(p is None or isinstance(p, int) for p in parts):
                raise self.err(node, "tuple slice bounds must be compile-time integers")
            return base[slice(*parts)]
        index = self.expr(node.slice)
        if isinstance(base, tuple):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.err(
                    node,
                    f"tuples can only be indexed with compile-time integers "
                    f"(found {_describe(index)}); iterate with static_range()",
                )
            if not -len(base) <= index < len(base):
                raise self.err(node, f"index {index} is out of range for a tuple of {len(base)}")
            return base[index]
        if isinstance(base, _Flat):
            return self.load(base.tensor, self.index_expr(index, node), node)
        if isinstance(base, _TensorRef):
            if base.is_output:
                raise self.err(
                    node, "the output cannot be read; use out.index / out.flat", KernelSyntaxError
                )
            idx = index if isinstance(index, tuple) else (index,)
            shape = base.spec.shape
            if len(idx) != len(shape):
                raise self.err(
                    node,
                    f"tensor {node.value.id if isinstance(node.value, ast.Name) else ''!s}"
                    f" has {len(shape)} dimensions {shape} but was indexed with "
                    f"{len(idx)}; use x.flat[i] for flat reads",
                )
            flat: Any = 0
            for i, s in zip(idx, base.strides):
                term = self.binop(ast.Mult(), self.index_expr(i, node), s, node)
                flat = self.binop(ast.Add(), flat, term, node)
            return self.load(base, self.index_expr(flat, node), node)
        raise self.err(node, f"{_describe(base)} cannot be indexed", KernelSyntaxError)

    def index_expr(self, v: Any, node: ast.AST) -> ir.Expr:
        if isinstance(v, bool) or (not isinstance(v, int) and not isinstance(v, ir.Expr)):
            raise self.err(node, f"tensor indices must be integers, found {_describe(v)}")
        e = self.materialize(v, node)
        if e.type == ScalarType.u32:
            e = ir.Cast(ScalarType.i32, e)
        if e.type != ScalarType.i32:
            raise self.err(node, f"tensor indices must be i32, found {e.type}; cast(i, i32)")
        return e

    def load(self, t: _TensorRef, index: ir.Expr, node: ast.AST) -> Any:
        if isinstance(index, ir.Const) and t.spec.size and not 0 <= index.value < t.spec.size:
            raise self.err(
                node,
                f"constant index {index.value} is out of bounds for tensor "
                f"{t.spec.name!r} of {t.spec.size} elements",
            )
        return ir.Load(t.spec.type, t.slot, index)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.expr(node.operand)
        op = node.op
        if _is_const(x):
            if isinstance(op, ast.Not):
                return not x
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[
                type(op)
            ](x)
        if not isinstance(x, ir.Expr):
            raise self.err(node, f"unary operator on {_describe(x)}")
        if isinstance(op, ast.UAdd):
            return x
        if isinstance(op, ast.Not):
            if x.type != ScalarType.bool:
                raise self.err(node, f"'not' needs a bool, found {x.type}; compare explicitly")
            return ir.Unary(ScalarType.bool, "not", x)
        if isinstance(op, ast.USub):
            if x.type in (ScalarType.bool, ScalarType.u32):
                raise self.err(node, f"cannot negate a {x.type}")
            if isinstance(x, ir.Const):
                return ir.Const(x.type, -x.value)
            return ir.Unary(x.type, "neg", x)
        if x.type == ScalarType.bool:
            return ir.Unary(ScalarType.bool, "not", x)
        if not x.type.is_int:
            raise self.err(node, f"'~' needs an integer, found {x.type}")
        return ir.Unary(x.type, "invert", x)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        sym = _OP_SYMBOL.get(type(op), type(op).__name__)
        if _is_const(a) and _is_const(b):
            try:
                return _PY_BINOP[type(op)](a, b)
            except ZeroDivisionError:
                raise self.err(
                    node, f"compile-time division by zero in {a!r} {sym} {b!r}"
                ) from None
        if not (isinstance(a, ir.Expr) or _is_const(a)) or not (
            isinstance(b, ir.Expr) or _is_const(b)
        ):
            raise self.err(node, f"operator {sym} cannot combine {_describe(a)} and {_describe(b)}")
        if isinstance(op, ast.Pow):
            return self.power(a, b, node)
        ea, eb = self.unify(a, b, node, f"'{sym}'")
        t = ea.type
        if isinstance(op, ast.BitAnd | ast.BitOr | ast.BitXor) and t == ScalarType.bool:
            logic = {ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "ne"}[type(op)]
            return ir.Binary(ScalarType.bool, logic, ea, eb)
        if t == ScalarType.bool:
            raise self.err(node, f"arithmetic '{sym}' on bools; convert with cast(x, i32)")
        if isinstance(op, ast.Div):
            if not t.is_float:
                raise self.err(
                    node,
                    f"'/' on {t} values; use '//' for integer division or cast to a float type",
                )
            return ir.Binary(t, "div", ea, eb)
        if isinstance(op, ast.FloorDiv | ast.Mod):
            floor = isinstance(op, ast.FloorDiv)
            if t.is_float:
                if floor:
                    return ir.Call(t, "floor", (ir.Binary(t, "div", ea, eb),))
                return ir.Call(t, "pymod", (ea, eb))
            return self.binop_int("div" if floor else "mod", ea, eb)
        if isinstance(op, ast.LShift | ast.RShift | ast.BitAnd | ast.BitOr | ast.BitXor):
            if not t.is_int:
                raise self.err(node, f"bitwise '{sym}' needs integers, found {t}")
        name = _IR_BINOP[type(op)]
        return _simplify(ir.Binary(t, name, ea, eb))

    def binop_int(self, op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        """Python-semantics integer // or %; C ops when operands are provably safe."""
        t = a.type
        if isinstance(b, ir.Const) and b.value == 1:
            return a if op == "div" else ir.Const(t, 0)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and b.value != 0:
            v = a.value // b.value if op == "div" else a.value % b.value
            return ir.Const(t, v)
        safe = isinstance(b, ir.Const) and b.value > 0 and self.is_nonneg(a)
        if safe:
            return ir.Binary(t, op, a, b)
        return ir.Call(t, "floordiv" if op == "div" else "floormod", (a, b))

    def power(self, a: Any, b: Any, node: ast.AST) -> Any:
        if (
            isinstance(b, int)
            and not isinstance(b, bool)
            and 0 <= b <= 4
            and isinstance(a, ir.Expr)
        ):
            if a.type == ScalarType.bool:
                raise self.err(node, "'**' on a bool")
            if b == 0:
                return ir.Const(a.type, 1.0 if a.type.is_float else 1)
            x = self.temp("pow", a, self.src.line(node)) if b > 1 else a
            result: ir.Expr = x
            for _ in range(b - 1):
                result = ir.Binary(a.type, "mul", result, x)
            return result
        ea, eb = self.unify(a, b, node, "'**'")
        if not ea.type.is_float:
            raise self.err(
                node,
                f"'**' on {ea.type} needs a compile-time exponent 0..4; "
                "use floats for general powers",
            )
        return ir.Call(ea.type, "pow", (ea, eb))

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for value_node in node.values:
            v = self.expr(value_node)
            if _is_const(v):
                if not isinstance(v, bool):
                    raise self.err(value_node, f"'and'/'or' need bools, found {v!r}")
                if v is (not is_and):  # short-circuit at compile time
                    return v
                continue
            if not isinstance(v, ir.Expr) or v.type != ScalarType.bool:
                raise self.err(
                    value_node,
                    f"'and'/'or' need bools, found {_describe(v)}; compare explicitly (x != 0)",
                )
            result = (
                v
                if result is None
                else ir.Binary(ScalarType.bool, "and" if is_and else "or", result, v)
            )
        return is_and if result is None else result

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        result: Any = True
        for op, comp_node in zip(node.ops, node.comparators):
            right = self.expr(comp_node)
            name = _CMP[type(op)]
            if _is_const(left) and _is_const(right):
                part: Any = _PY_CMP[name](left, right)
            else:
                a, b = self.unify(left, right, node, f"'{name}'")
                part = ir.Binary(ScalarType.bool, name, a, b)
            if part is False:
                return False
            if part is not True:
                result = part if result is True else ir.Binary(ScalarType.bool, "and", result, part)
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if _is_const(cond):
            return self.expr(node.body if cond else node.orelse)
        if not isinstance(cond, ir.Expr) or cond.type != ScalarType.bool:
            raise self.err(
                node.test,
                f"a conditional expression needs a bool condition, found {_describe(cond)}",
            )
        a, b = self.unify(self.expr(node.body), self.expr(node.orelse), node, "'if/else'")
        return ir.Select(a.type, cond, a, b)

    def expr_Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute):
            name = _MATH_ALIASES.get(func.attr, func.attr)
            return self.intrinsic(name, [self.expr(a) for a in node.args], node)
        assert isinstance(func, ast.Name)
        name = func.id
        target = self.scope.env.get(name)
        if target is None:
            found, value = self.src.lookup_global(name)
            target = value if found else None
        if isinstance(target, Helper):
            return self.call_helper(target, [self.expr(a) for a in node.args], node)
        if name in ("float", "int", "bool") and len(node.args) == 1:
            arg_node = node.args[0]
            if (
                name == "float"
                and isinstance(arg_node, ast.Constant)
                and isinstance(arg_node.value, str)
            ):
                text = arg_node.value.strip().lower()
                if text in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
                    return float(text)
                raise self.err(node, f"float({arg_node.value!r}): only 'nan', 'inf' and '-inf'")
            v = self.expr(arg_node)
            t = {"float": ScalarType.f32, "int": ScalarType.i32, "bool": ScalarType.bool}[name]
            if _is_const(v):
                return {"float": float, "int": int, "bool": bool}[name](v)
            return self.cast(v, t, node)
        args = [self.expr(a) for a in node.args]
        if name == "len":
            if len(args) != 1 or not isinstance(args[0], tuple):
                raise self.err(node, "len() takes one compile-time tuple")
            return len(args[0])
        if name == "cast_like":
            if len(args) != 2 or not isinstance(args[1], ir.Expr):
                raise self.err(
                    node,
                    "cast_like(value, like) takes a value and a runtime value "
                    "whose type to convert to",
                )
            return self.cast(args[0], args[1].type, node)
        if name in ("_rawdiv", "_rawmod") and self.src.fn.__module__ == "spawnml.kernel.polyfills":
            a, b = self.unify(args[0], args[1], node, name)
            return ir.Binary(a.type, name[4:], a, b)
        if name in ("cast", "bitcast"):
            if len(args) != 2:
                raise self.err(node, f"{name}(value, type) takes 2 arguments")
            t = scalar_type_of(args[1]) if not isinstance(args[1], ir.Expr | tuple) else None
            if t is None:
                raise self.err(
                    node,
                    f"{name}: {_describe(args[1])} is not a type (f32, f16, i32, "
                    "u32, i64, boolean or x.dtype)",
                )
            return self.cast(args[0], t, node) if name == "cast" else self.bitcast(args[0], t, node)
        return self.intrinsic(name, args, node)

    def cast(self, v: Any, t: ScalarType, node: ast.AST) -> ir.Expr:
        if _is_const(v):
            if t == ScalarType.bool:
                return ir.Const(t, bool(v))
            if t.is_float:
                return ir.Const(t, float(v))
            if isinstance(v, float) and not math.isfinite(v):
                raise self.err(node, f"cannot convert {v} to {t}")
            return self.materialize(int(v), node, t)
        e = self.materialize(v, node)
        if e.type == t:
            return e
        if t == ScalarType.bool:
            return ir.Binary(
                ScalarType.bool, "ne", e, ir.Const(e.type, 0.0 if e.type.is_float else 0)
            )
        return ir.Cast(t, e)

    def bitcast(self, v: Any, t: ScalarType, node: ast.AST) -> ir.Expr:
        e = self.materialize(v, node)
        ok = (ScalarType.f32, ScalarType.i32, ScalarType.u32)
        if e.type not in ok or t not in ok:
            raise self.err(
                node, f"bitcast converts between f32, i32 and u32; found {e.type} -> {t}"
            )
        return e if e.type == t else ir.Bitcast(t, e)

    def intrinsic(self, name: str, args: list[Any], node: ast.AST) -> Any:
        if name in ("min", "max") and len(args) > 2:
            result = args[0]
            for a in args[1:]:
                result = self.intrinsic(name, [result, a], node)
            return result
        spec = INTRINSICS.get(name)
        if spec is None:
            raise self.err(
                node,
                f"{name!r} is not an intrinsic or @helper; intrinsics: "
                f"{', '.join(sorted(INTRINSICS))}",
                KernelSyntaxError,
            )
        if len(args) != spec.arity:
            raise self.err(node, f"{name}() takes {spec.arity} argument(s), got {len(args)}")
        if all(_is_const(a) for a in args) and name in _PY_FOLD:
            return _PY_FOLD[name](*args)
        if any(not (isinstance(a, ir.Expr) or _is_const(a)) for a in args):
            raise self.err(
                node,
                f"{name}() takes scalar values, found " + ", ".join(_describe(a) for a in args),
            )
        typed = [a.type for a in args if isinstance(a, ir.Expr)]
        if typed:
            t = typed[0]
            for other in typed[1:]:
                if other != t:
                    raise self.err(
                        node,
                        f"{name}() arguments have types {t} and {other}; "
                        "convert explicitly with cast()",
                    )
        else:
            t = (
                ScalarType.f32
                if spec.accepts == "float" or any(isinstance(a, float) for a in args)
                else ScalarType.i32
            )
        exprs = tuple(self.materialize(a, node, t) for a in args)
        if not spec.accepts_type(t):
            raise self.err(node, f"{name}() needs {spec.accepts} arguments, found {t}")
        return ir.Call(spec.result_type(t), name, exprs)


# ---------------------------------------------------------------------------- tables


_OP_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_PY_BINOP = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_IR_BINOP = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.LShift: "shl",
    ast.RShift: "shr",
    ast.BitAnd: "bitand",
    ast.BitOr: "bitor",
    ast.BitXor: "bitxor",
}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMP = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}
_PY_FOLD = {"min": min, "max": max, "abs": abs}


def _simplify(e: ir.Binary) -> ir.Expr:
    """Fold the identities index arithmetic produces once shapes are constants."""
    a, b, op = e.a, e.b, e.op
    ca = a.value if isinstance(a, ir.Const) else None
    cb = b.value if isinstance(b, ir.Const) else None
    if ca is not None and cb is not None and e.type.is_int and op in ("add", "sub", "mul"):
        v = {"add": ca + cb, "sub": ca - cb, "mul": ca * cb}[op]
        if _I32[0] <= v <= _I32[1] or e.type != ScalarType.i32:
            return ir.Const(e.type, v)
    if op == "add":
        if cb == 0 and e.type.is_int:
            return a
        if ca == 0 and e.type.is_int:
            return b
    if op == "sub" and cb == 0 and e.type.is_int:
        return a
    if op == "mul" and e.type.is_int:
        if cb == 1:
            return a
        if ca == 1:
            return b
        if cb == 0 or ca == 0:
            return ir.Const(e.type, 0)
    return e


def _describe(v: Any) -> str:
    if isinstance(v, ir.Expr):
        return f"a runtime {v.type} value"
    if isinstance(v, _TensorRef):
        return "the output" if v.is_output else f"tensor {v.spec.name!r}"
    if isinstance(v, _Flat):
        return f"{v.tensor.spec.name}.flat"
    if isinstance(v, tuple):
        return f"the tuple {v!r}"
    if isinstance(v, ScalarType):
        return f"the type {v}"
    if _is_const(v):
        return f"the constant {v!r}"
    return f"a {type(v).__name__}"


def _body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def _always_returns(stmts: Sequence[ir.Stmt]) -> bool:
    for s in stmts:
        if isinstance(s, ir.Return):
            return True
        if isinstance(s, ir.If) and _always_returns(s.then) and _always_returns(s.orelse):
            return True
    return False


# ---------------------------------------------------------------------------- entry point


def _check_const(k: Kernel, name: str, value: Any) -> Any:
    ann = k.signature.parameters[name].annotation
    ann_name = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
    where = f"kernel {k.name!r} ({k.location})"
    if ann_name == "Helper":
        if not isinstance(value, Helper):
            raise KernelTypeError(f"{where}: constant {name!r} must be a @helper, got {value!r}")
        return value
    if ann_name == "bool":
        if not isinstance(value, bool | np.bool_):
            raise KernelTypeError(f"{where}: constant {name!r} must be a bool, got {value!r}")
        return bool(value)
    if ann_name == "int":
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise KernelTypeError(f"{where}: constant {name!r} must be an int, got {value!r}")
        return int(value)
    if ann_name == "float":
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise KernelTypeError(f"{where}: constant {name!r} must be a float, got {value!r}")
        return float(value)
    if isinstance(value, list | np.ndarray):
        value = tuple(np.asarray(value).tolist())

    def norm(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return tuple(norm(x) for x in v)
        if isinstance(v, np.generic):
            return v.item()
        if not _is_const(v):
            raise KernelTypeError(
                f"{where}: constant {name!r} holds {v!r}; tuples may hold only numbers and bools"
            )
        return v

    if not isinstance(value, tuple):
        raise KernelTypeError(f"{where}: constant {name!r} must be a tuple, got {value!r}")
    return norm(value)


def specialize(
    k: Kernel, inputs: Mapping[str, Any] | Sequence[Any], output: Any, consts: Mapping[str, Any]
) -> ir.KernelIR:
    """Specialise kernel ``k`` (see :meth:`Kernel.specialize`)."""
    where = f"kernel {k.name!r} ({k.location})"
    if isinstance(inputs, Mapping):
        unknown = set(inputs) - set(k.tensor_names)
        missing = [n for n in k.tensor_names if n not in inputs]
        if unknown or missing:
            raise KernelTypeError(
                f"{where}: tensor inputs are {k.tensor_names}; missing "
                f"{missing}, unknown {sorted(unknown)}"
            )
        ordered = [inputs[n] for n in k.tensor_names]
    else:
        ordered = list(inputs)
        if len(ordered) != len(k.tensor_names):
            raise KernelTypeError(
                f"{where}: expected {len(k.tensor_names)} input tensors "
                f"{k.tensor_names}, got {len(ordered)}"
            )
    specs = []
    for name, value in zip(k.tensor_names, ordered):
        shape, dt = _spec_of(name, value)
        if compute_type(dt) is None:
            raise KernelTypeError(
                f"{where}: input {name!r} has dtype {dt}, which kernels cannot "
                "read (float64, bfloat16 and uint64 are lowered by the planner)"
            )
        specs.append(ir.BufferSpec(name, dt, shape))
    oshape, odt = _spec_of(k.output_name, output)
    if compute_type(odt) is None:
        raise KernelTypeError(f"{where}: output dtype {odt} is not a kernel type")
    out_spec = ir.BufferSpec(k.output_name, odt, oshape)
    if out_spec.size >= 2**31 or any(s.size >= 2**31 for s in specs):
        raise KernelTypeError(f"{where}: tensors of 2**31 elements or more are not supported")
    values: dict[str, Any] = {}
    for name in k.const_names:
        if name in consts:
            values[name] = _check_const(k, name, consts[name])
        else:
            default = k.signature.parameters[name].default
            if default is k.signature.parameters[name].empty:
                raise KernelTypeError(f"{where}: missing constant {name!r}")
            values[name] = _check_const(k, name, default)
    extra = set(consts) - set(k.const_names)
    if extra:
        raise KernelTypeError(
            f"{where}: unknown constants {sorted(extra)}; the kernel's "
            f"constants are {k.const_names}"
        )
    cache_key = (
        tuple((s.shape, s.dtype) for s in specs),
        (oshape, odt),
        tuple(sorted((n, repr(v)) for n, v in values.items())),
    )
    with k._lock:
        cached = k._cache.get(cache_key)
    if cached is not None:
        return cached
    runtime: set[str] = set()
    for _ in range(256):
        s = _Specializer(k, specs, out_spec, values, runtime)
        try:
            local_vars, body = s.run()
            break
        except _Promote as p:
            runtime.add(p.key)
    else:  # pragma: no cover - each restart adds a name, so this cannot loop for long
        raise KernelTypeError(f"{where}: too many variables promoted to runtime")
    result = ir.KernelIR(k.name, tuple(specs), out_spec, local_vars, body, source=k.location)
    result = ir.KernelIR(
        result.name,
        result.inputs,
        result.output,
        result.locals,
        result.body,
        result.source,
        key=f"{k.name}-{result.fingerprint()}",
    )
    with k._lock:
        k._cache[cache_key] = result
    return result


class _FunctionSpecializer(_Specializer):
    """Specialises a helper as a standalone function (for polyfills) instead of inlining it."""

    def __init__(self, h: Helper, arg_types: Sequence[ScalarType], runtime_names: set[str]) -> None:
        self.helper = h
        self.runtime_names = runtime_names
        self.locals = {}
        self.nonneg = set()
        self.loop_vars = set()
        self.depth = 0
        self.blocks = [[]]
        self.helper_stack = []
        self.call_counter = 0
        self.scope = _Scope(h.src, "")
        self.index_vars = None
        self._prologue = []
        self._frames = []
        self.ret_type: ScalarType | None = None
        self.params = []
        for p, t in zip(h.signature.parameters, arg_types):
            var = ir.Var(t, f"p_{p}")
            self.params.append(var)
            self.scope.env[p] = var

    def stmt_Return(self, node: ast.Return) -> None:
        if self.helper_stack:
            return super().stmt_Return(node)
        assert node.value is not None
        value = self.expr(node.value)
        if self.ret_type is None:
            default = self.params[0].type if self.params else None
            e = self.materialize(value, node, None if isinstance(value, ir.Expr) else default)
            self.ret_type = e.type
        else:
            e = self.materialize(value, node, self.ret_type)
        self.emit(ir.Return(self.src.line(node), e))


def specialize_function(h: Helper, name: str, arg_types: Sequence[ScalarType]) -> ir.Function:
    """A helper specialised for argument types as a callable :class:`ir.Function`."""
    runtime: set[str] = set()
    while True:
        s = _FunctionSpecializer(h, arg_types, runtime)
        try:
            s.block(_body_without_docstring(h.src.tree))
            break
        except _Promote as p:
            runtime.add(p.key)
    body = tuple(s.blocks[0])
    assert s.ret_type is not None, f"polyfill {h.name} does not return"
    return ir.Function(name, tuple(s.params), s.ret_type, tuple(s.locals.values()), body)
