"""Specialisation of statements: the walk over a kernel body that emits typed IR."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ..errors import KernelSyntaxError, KernelTypeError
from . import ir
from .frontend import Helper, Kernel, _Source
from .spec_exprs import ExpressionSpecializer
from .spec_support import (
    _I32,
    _MAX_UNROLL,
    _always_returns,
    _body_without_docstring,
    _describe,
    _is_const,
    _Promote,
    _Scope,
    _TensorRef,
)
from .types import ScalarType


class Specializer(ExpressionSpecializer):
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
                ScalarType.u64: (0, 2**64 - 1),
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
        if e.type.is_int and not e.type.is_signed:
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
        if name in self.src.bound_once and self.is_nonneg(e):
            self.nonneg.add(var.name)  # f = out.flat: f // s is a plain division

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
        if all(isinstance(b, int) and not isinstance(b, bool) for b in (start, stop)):
            trips = range(start, stop, step)
            if len(trips) <= 1:  # nothing to loop over: no loop (a trip-1 loop costs a
                self.unroll(name, list(trips), node)  # branch and, on llvmpipe, its limiter)
                return
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
