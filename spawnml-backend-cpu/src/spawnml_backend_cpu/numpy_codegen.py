"""Kernel IR -> vectorised numpy source.

Lanes form an n-d grid over the output's axes (one chunk of it per call), so values
broadcast like numpy arrays. Reads whose flat index is affine in the output index and loop
variables become strided views (no copy); other reads are clipped gathers. Branches whose
condition differs across lanes become masked selects, and ``return`` writes the lanes still
alive. A loop nest that only accumulates (``acc = acc + e``, ``max``, ``min``, ``*``) is
evaluated at once along extra axes and reduced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spawnml.kernel import ir
from spawnml.kernel.analysis import nonneg, strides, trip_count
from spawnml.kernel.ir import Op
from spawnml.kernel.polyfills import function_name
from spawnml.kernel.types import ScalarType
from spawnml.kernel.visitor import Visitor

_NP = {t: f"_dt_{t.value}" for t in ScalarType}
_CALLS = {
    "exp": "_np.exp",
    "exp2": "_np.exp2",
    "log": "_np.log",
    "log2": "_np.log2",
    "sqrt": "_np.sqrt",
    "sin": "_np.sin",
    "cos": "_np.cos",
    "tan": "_np.tan",
    "asin": "_np.arcsin",
    "acos": "_np.arccos",
    "atan": "_np.arctan",
    "sinh": "_np.sinh",
    "cosh": "_np.cosh",
    "tanh": "_np.tanh",
    "asinh": "_np.arcsinh",
    "acosh": "_np.arccosh",
    "atanh": "_np.arctanh",
    "floor": "_np.floor",
    "ceil": "_np.ceil",
    "trunc": "_np.trunc",
    "round": "_np.rint",
    "pow": "_np.power",
    "atan2": "_np.arctan2",
    "fmod": "_np.fmod",
    "abs": "_np.abs",
    "sign": "_np.sign",
    "min": "_np.minimum",
    "max": "_np.maximum",
    "isnan": "_np.isnan",
    "isinf": "_np.isinf",
    "isfinite": "_np.isfinite",
    "floordiv": "_np.floor_divide",
    "floormod": "_np.remainder",
    "truncdiv": "_rt.truncdiv",
    "truncmod": "_rt.truncmod",
    "pymod": "_np.mod",
}
NATIVE = frozenset(_CALLS) | {"rsqrt"}
_BIN = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "mod": "%",
    "bitand": "&",
    "bitor": "|",
    "bitxor": "^",
    "shl": "<<",
    "shr": ">>",
    "and": "&",
    "or": "|",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
}
_CONVERSIONS = {ir.Cast: "_rt.convert", ir.Bitcast: "_rt.bitcast"}
ARITH = (Op.ADD, Op.SUB, Op.MUL)  # the operators of affine index forms
_REDUCE = {
    "add": ("_np.sum", "+"),
    "mul": ("_np.prod", "*"),
    "max": ("_np.max", "_np.maximum"),
    "min": ("_np.min", "_np.minimum"),
}


def _identity(op: str, t: ScalarType) -> object:
    if op == "add":
        return 0
    if op == "mul":
        return 1
    if t.is_float:
        return float("-inf") if op == "max" else float("inf")
    info = np.iinfo(t.numpy)
    return int(info.min) if op == "max" else int(info.max)


@dataclass
class _Nest:
    """A loop nest evaluated along extra axes."""

    axes: dict[str, int]  # loop var -> axis
    ranges: list[tuple[int, int, int]]
    accumulators: dict[str, str]  # var -> reduce op
    outer_reads: set[str]
    trip: int


@dataclass
class Generated:
    source: str
    constants: dict[str, object]
    max_trip: int  # largest vectorised loop-nest size (chunking budget)
    uses_gid: bool = False
    functions: list[str] = field(default_factory=list)


class NumpyCodegen(Visitor):
    """Renders one KernelIR as a Python function ``kernel(_out, _ins, _grid, _rng, _cs)``."""

    def __init__(self, k: ir.KernelIR, functions: list[ir.Function]) -> None:
        self.k = k
        self.functions = {f.name: f for f in functions}
        self.lines: list[str] = []
        self.consts: dict[object, str] = {}
        self.tmp = 0
        self.R = len(k.output.shape)
        self.grid_vars = {f"o{d}": d for d in range(self.R)}
        self.partial = _has_partial_return(k.body)
        self.varying = _varying_vars(k, self.partial)
        self.single = _single_assignment(k.body)
        self.affine_env: dict[str, tuple[object, dict[int, int]]] = {}
        self.nest: _Nest | None = None
        self.extra_axes = 0
        self.max_trip = 1
        self.uses_gid = False
        self.renames: dict[str, str] = {}
        self.nest_assigned: set[str] = set()  # temporaries already written in this nest
        self.alive_full = True  # no lane has returned yet at this point of the code
        self.top_level = True  # straight-line code at the kernel's top level

    # ---------------------------------------------------------------- output
    def render(self) -> Generated:
        k = self.k
        body = [
            s for s in k.body if not (isinstance(s, ir.Assign) and s.var.name in self.grid_vars)
        ]
        for v in k.locals:
            if v.name not in self.grid_vars:
                zero = False if v.type == ScalarType.bool else 0
                self.emit(1, f"{v.name} = {self.const(zero, v.type)}")
        out_t = k.output.type
        self.emit(1, f"_res = {self.const(False if out_t == ScalarType.bool else 0, out_t)}")
        if self.partial:
            self.emit(1, "_alive = _np.ones(_cs, dtype=bool)")
        self.block(1, tuple(body), None)
        self.emit(1, "return _res")
        header = ["def kernel(_out, _ins, _grid, _rng, _cs):"]
        if k.inputs:
            header.append("    " + ", ".join(f"in{i}" for i in range(len(k.inputs))) + ", = _ins")
        if self.R:
            header.append("    " + ", ".join(self.grid_vars) + ", = _grid")
        if self.uses_gid:
            terms = " + ".join(f"o{d} * {s}" for d, s in enumerate(strides(k.output.shape))) or "0"
            header.append(f"    _gid = _np.asarray({terms}, dtype=_np.int32)")
        fn_sources = [self.render_function(f) for f in self.functions.values()]
        source = "\n".join([*fn_sources, *header, *self.lines]) + "\n"
        return Generated(
            source,
            {name: value for value, name in self.consts.items()},
            self.max_trip,
            self.uses_gid,
            fn_sources,
        )

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def const(self, value: object, t: ScalarType) -> str:
        key = (t, repr(value))
        if key not in self.consts:
            self.consts[key] = f"_K{len(self.consts)}"
        return self.consts[key]

    def fresh(self, base: str) -> str:
        self.tmp += 1
        return f"_{base}{self.tmp}"

    # ---------------------------------------------------------------- functions (polyfills)
    def render_function(self, f: ir.Function) -> str:
        sub = NumpyCodegen.__new__(NumpyCodegen)
        sub.__dict__.update(self.__dict__)
        sub.lines = []
        sub.varying = {v.name for v in f.locals} | {p.name for p in f.params}
        sub.partial = False
        sub.single = {}
        sub.affine_env = {}
        sub.nest = None
        sub.grid_vars = {}
        sub.emit(0, f"def {f.name}({', '.join(p.name for p in f.params)}):")
        for s in f.body:
            if isinstance(s, ir.Assign):
                sub.emit(1, f"{s.var.name} = {sub.expr(s.value)}")
            elif isinstance(s, ir.Return):
                sub.emit(1, f"return {sub.expr(s.value)}")
            else:
                raise NotImplementedError("numpy polyfill functions must be straight-line code")
        self.consts = sub.consts
        return "\n".join(sub.lines) + "\n"

    # ---------------------------------------------------------------- statements
    def block(self, depth: int, stmts: tuple[ir.Stmt, ...], mask: str | None) -> None:
        for s in stmts:
            if self.stmt(depth, s, mask):
                return  # an unconditional return ends the block

    def eff(self, mask: str | None) -> str | None:
        if not self.partial or self.alive_full:
            return mask
        return "_alive" if mask is None else f"({mask} & _alive)"

    def stmt(self, d: int, s: ir.Stmt, mask: str | None) -> bool:
        """Emit ``s`` at depth ``d`` for the lanes in ``mask``; True when it ends the block."""
        return bool(self.visit(s, d, mask))

    def visit_Assign(self, s: ir.Assign, d: int, mask: str | None) -> bool:
        value = self.expr(s.value)
        m = self.eff(mask)
        name = s.var.name
        form = self.affine(s.value) if m is None else None
        if form is not None and (name in self.single or self.top_level):
            self.affine_env[name] = form
        else:
            self.affine_env.pop(name, None)
        if m is None:
            self.emit(d, f"{name} = {value}")
        else:
            self.emit(d, f"{name} = _np.where({m}, {value}, {name})")
        return False

    def visit_Return(self, s: ir.Return, d: int, mask: str | None) -> bool:
        m = self.eff(mask)
        value = self.expr(s.value)
        if m is None:
            self.emit(d, f"_res = {value}")
            return True
        self.emit(d, f"_res = _np.where({m}, {value}, _res)")
        self.emit(d, f"_alive = _alive & ~{m}")
        self.alive_full = False
        return False

    def visit_If(self, s: ir.If, d: int, mask: str | None) -> bool:
        entry_alive, entry_top = self.alive_full, self.top_level
        self.top_level = False
        self.if_stmt(d, s, mask, entry_alive)
        self.top_level = entry_top
        return False

    def visit_For(self, s: ir.For, d: int, mask: str | None) -> bool:
        entry_top = self.top_level
        self.top_level = False
        if any(isinstance(x, ir.Return) for x in ir.walk_stmts(s.body)):
            self.alive_full = False
        self.loop(d, s, mask)
        self.top_level = entry_top
        return False

    def if_stmt(self, d: int, s: ir.If, mask: str | None, entry_alive: bool) -> None:
        """Branches see the lanes alive on entry: the two branches' lanes are disjoint."""
        cond = self.expr(s.cond)
        if not self.is_varying(s.cond):
            self.emit(d, f"if {cond}:")
            self.emit(d + 1, "pass")
            self.block(d + 1, s.then, mask)
            after_then, self.alive_full = self.alive_full, entry_alive
            if s.orelse:
                self.emit(d, "else:")
                self.emit(d + 1, "pass")
                self.block(d + 1, s.orelse, mask)
            self.alive_full = self.alive_full and after_then
            return
        c, mt, me = self.fresh("c"), self.fresh("m"), self.fresh("m")
        self.emit(d, f"{c} = {cond}")
        self.emit(d, f"{mt} = {c}" if mask is None else f"{mt} = {mask} & {c}")
        if s.orelse:
            self.emit(d, f"{me} = ~{c}" if mask is None else f"{me} = {mask} & ~{c}")
        self.emit(d, f"if {mt}.any():")
        self.emit(d + 1, "pass")
        self.block(d + 1, s.then, mt)
        after_then, self.alive_full = self.alive_full, entry_alive
        if s.orelse:
            self.emit(d, f"if {me}.any():")
            self.emit(d + 1, "pass")
            self.block(d + 1, s.orelse, me)
        self.alive_full = self.alive_full and after_then

    def loop(self, d: int, s: ir.For, mask: str | None) -> None:
        nest = None if self.nest is not None else _plan_nest(s, self.k, self.varying, self.R)
        if nest is not None:
            self.vectorised_nest(d, s, nest, mask)
            return
        var = s.var.name
        if not (self.is_varying(s.start) or self.is_varying(s.stop)):
            it = self.fresh("i")
            self.emit(
                d,
                f"for {it} in range(int({self.expr(s.start)}), "
                f"int({self.expr(s.stop)}), {s.step}):",
            )
            self.emit(d + 1, f"{var} = _np.int32({it})")
            self.block(d + 1, s.body, mask)
            return
        st, trip, kk, mk = self.fresh("s"), self.fresh("t"), self.fresh("k"), self.fresh("m")
        adj = s.step - 1 if s.step > 0 else s.step + 1
        self.emit(d, f"{st} = {self.expr(s.start)}")
        self.emit(d, f"{trip} = _np.maximum(0, ({self.expr(s.stop)} - {st} + {adj}) // {s.step})")
        self.emit(d, f"for {kk} in range(int(_np.max({trip}, initial=0))):")
        self.emit(d + 1, f"{var} = ({st} + _np.int32({kk} * {s.step})).astype(_np.int32)")
        self.emit(d + 1, f"{mk} = ({kk} < {trip})" + ("" if mask is None else f" & {mask}"))
        self.block(d + 1, s.body, mk)

    def vectorised_nest(self, d: int, s: ir.For, nest: _Nest, mask: str | None) -> None:
        k = len(nest.ranges)
        self.max_trip = max(self.max_trip, nest.trip)
        saved_env = dict(self.affine_env)
        renames: dict[str, str] = {}
        for name in sorted(nest.outer_reads):
            if name in self.varying:
                alias = self.fresh(f"x_{name}")
                self.emit(d, f"{alias} = _rt.expand({name}, {k})")
                renames[name] = alias
        outer_mask = self.eff(mask)
        if outer_mask is not None:
            alias = self.fresh("xm")
            self.emit(d, f"{alias} = _rt.expand({outer_mask}, {k})")
            outer_mask = alias
        self.nest = nest
        self.extra_axes = k
        self.renames = renames
        self.nest_assigned = set()
        self.nest_body(d, (s,), outer_mask, (), nest)
        self.nest = None
        self.extra_axes = 0
        self.renames = {}
        self.affine_env = saved_env

    def nest_body(
        self,
        d: int,
        stmts: tuple[ir.Stmt, ...],
        mask: str | None,
        enclosing: tuple[int, ...],
        nest: _Nest,
    ) -> None:
        for s in stmts:
            if isinstance(s, ir.For):
                axis = nest.axes[s.var.name]
                start, count, step = nest.ranges[axis - self.R]
                self.emit(
                    d,
                    f"{s.var.name} = _rt.loop_axis({start}, {count}, {step}, {axis}, "
                    f"{self.R + len(nest.ranges)})",
                )
                self.affine_env[s.var.name] = (0, {axis: 1})
                self.nest_body(d, s.body, mask, (*enclosing, axis), nest)
            elif isinstance(s, ir.If):
                c = self.fresh("c")
                self.emit(d, f"{c} = {self.expr(s.cond)}")
                mt = c if mask is None else f"({mask} & {c})"
                self.nest_body(d, s.then, mt, enclosing, nest)
                if s.orelse:
                    me = f"~{c}" if mask is None else f"({mask} & ~{c})"
                    self.nest_body(d, s.orelse, me, enclosing, nest)
            elif isinstance(s, ir.Assign) and s.var.name in nest.accumulators:
                op = nest.accumulators[s.var.name]
                e = _accumulated_operand(s)
                value = self.expr(e)
                t = s.var.type
                if mask is not None:
                    value = f"_np.where({mask}, {value}, {self.const(_identity(op, t), t)})"
                loop_shape = tuple(
                    nest.ranges[a - self.R][1] if a in enclosing else 1
                    for a in range(self.R, self.R + len(nest.ranges))
                )
                fn, combine = _REDUCE[op]
                reduced = (
                    f"_rt.reduce_loops({fn}, {value}, {self.R}, {loop_shape!r}, "
                    f"{_NP[t]}, {self.const(_identity(op, t), t)})"
                )
                name = s.var.name
                if combine in ("+", "*"):
                    self.emit(d, f"{name} = ({name} {combine} {reduced}).astype({_NP[t]})")
                else:
                    self.emit(d, f"{name} = {combine}({name}, {reduced})")
            elif isinstance(s, ir.Assign):
                name, value = s.var.name, self.expr(s.value)
                first = name not in self.nest_assigned
                self.nest_assigned.add(name)
                # Under an if, lanes outside it keep the value written earlier in this
                # iteration. A first write has no such value: every read of a nest
                # temporary sits under the mask of its write (_plan_nest checks it), and
                # the value from before the nest lacks the loop axes, so it must not be
                # broadcast against them.
                if mask is not None and not first:
                    self.emit(d, f"{name} = _np.where({mask}, {value}, {name})")
                    self.affine_env.pop(name, None)
                    continue
                self.emit(d, f"{name} = {value}")
                form = self.affine(s.value)
                if form is not None:
                    self.affine_env[s.var.name] = form
                else:
                    self.affine_env.pop(s.var.name, None)
            else:
                raise AssertionError("a vectorised nest holds only assignments, ifs and loops")

    # ---------------------------------------------------------------- expressions
    def is_varying(self, e: ir.Expr) -> bool:
        for node in ir.walk_expr(e):
            if isinstance(node, ir.GlobalIndex):
                return True
            if isinstance(node, ir.Var) and (
                node.name in self.varying or node.name in self.grid_vars
            ):
                return True
        return False

    def affine(self, e: ir.Expr) -> tuple[object, dict[int, int]] | None:
        """(const, {axis: coeff}) when ``e`` is affine in grid/loop axes; const may be a
        Python expression over uniform runtime values."""
        if isinstance(e, ir.Const) and e.type.is_int:
            return (int(e.value), {})
        if isinstance(e, ir.GlobalIndex):
            return (0, dict(enumerate(strides(self.k.output.shape))))
        if isinstance(e, ir.Var):
            if e.name in self.affine_env:
                return self.affine_env[e.name]
            if e.name in self.grid_vars:
                return (0, {self.grid_vars[e.name]: 1})
            if e.type.is_int and not self.is_varying(e) and e.name in self.single:
                return (f"int({e.name})", {})
            return None
        if isinstance(e, ir.Binary) and e.op in ARITH and e.type == ScalarType.i32:
            a, b = self.affine(e.a), self.affine(e.b)
            if a is None or b is None:
                return None
            if e.op == "mul":
                if not b[1] and isinstance(b[0], int):
                    a, b = b, a
                if a[1] or not isinstance(a[0], int):
                    return None
                c = a[0]
                const = b[0] * c if isinstance(b[0], int) else f"({b[0]} * {c})"
                return (const, {ax: co * c for ax, co in b[1].items() if co * c})
            sign = 1 if e.op == "add" else -1
            terms = dict(a[1])
            for ax, co in b[1].items():
                terms[ax] = terms.get(ax, 0) + sign * co
            if isinstance(a[0], int) and isinstance(b[0], int):
                const: object = a[0] + sign * b[0]
            else:
                const = f"({a[0]} {'+' if sign > 0 else '-'} {b[0]})"
            return (const, {ax: co for ax, co in terms.items() if co})
        return None

    def expr(self, e: ir.Expr) -> str:
        return self.visit(e)

    def visit_Const(self, e: ir.Const) -> str:
        return self.const(e.value, e.type)

    def visit_Var(self, e: ir.Var) -> str:
        return self.renames.get(e.name, e.name) if self.nest else e.name

    def visit_GlobalIndex(self, e: ir.GlobalIndex) -> str:
        self.uses_gid = True
        return f"_rt.expand(_gid, {self.extra_axes})" if self.nest else "_gid"

    def visit_Load(self, e: ir.Load) -> str:
        return self.load(e)

    def visit_Unary(self, e: ir.Unary) -> str:
        x = self.expr(e.x)
        return {"neg": f"(-{x})", "not": f"_np.logical_not({x})", "invert": f"(~{x})"}[e.op]

    def visit_Binary(self, e: ir.Binary) -> str:
        if (
            e.op in (Op.DIV, Op.MOD)
            and e.type.is_int
            and not (isinstance(e.b, ir.Const) and e.b.value > 0 and self.nonneg(e.a))
        ):
            fn = "_rt.truncdiv" if e.op == Op.DIV else "_rt.truncmod"
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
        # a non-negative int divided by a positive constant: numpy's "/" is true division
        op = "//" if e.op == Op.DIV and e.type.is_int else _BIN[e.op]
        return f"({self.expr(e.a)} {op} {self.expr(e.b)})"

    def visit_Select(self, e: ir.Select) -> str:
        return f"_np.where({self.expr(e.cond)}, {self.expr(e.a)}, {self.expr(e.b)})"

    def convert(self, e: ir.Cast | ir.Bitcast) -> str:
        return f"{_CONVERSIONS[type(e)]}({self.expr(e.x)}, {_NP[e.type]})"

    visit_Cast = visit_Bitcast = convert

    def visit_Call(self, e: ir.Call) -> str:
        args = ", ".join(self.expr(a) for a in e.args)
        if e.fn == "rsqrt":
            return f"({self.const(1, e.type)} / _np.sqrt({args}))"
        if e.fn in _CALLS:
            return f"{_CALLS[e.fn]}({args})"
        return f"{function_name(e.fn, e.args[0].type)}({args})"

    def nonneg(self, e: ir.Expr) -> bool:
        """Whether ``e`` is evidently >= 0 (then C and Python integer division agree)."""
        return nonneg(e, self.grid_vars.keys())

    def load(self, e: ir.Load) -> str:
        buf = f"in{e.buffer}"
        storage = self.k.inputs[e.buffer].dtype.numpy
        form = self.affine(e.index)
        if form is not None and form[1]:
            const, terms = form
            ranges = "_rng" if not self.nest else f"_rng + {tuple(self.nest.ranges)!r}"
            value = f"_rt.affine_load({buf}, {const}, {tuple(sorted(terms.items()))!r}, {ranges})"
        else:
            value = f"_rt.take({buf}, {self.expr(e.index)})"
        if storage != e.type.numpy:
            value = f"_rt.convert({value}, {_NP[e.type]})"
        return value


# -------------------------------------------------------------------------------- analyses


def _has_partial_return(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether some return is not the kernel's final top-level statement."""
    returns = [s for s in ir.walk_stmts(body) if isinstance(s, ir.Return)]
    return not (len(returns) == 1 and body and body[-1] is returns[0])


def _single_assignment(body: tuple[ir.Stmt, ...]) -> set[str]:
    counts: dict[str, int] = {}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign | ir.For):
            name = s.var.name
            counts[name] = counts.get(name, 0) + 1
    return {n for n, c in counts.items() if c == 1}


def _varying_vars(k: ir.KernelIR, partial: bool) -> set[str]:
    """Variables whose value can differ between lanes."""
    varying = {f"o{d}" for d in range(len(k.output.shape))}
    if partial:
        return varying | {v.name for v in k.locals}

    def dep(e: ir.Expr) -> bool:
        return any(
            isinstance(n, ir.GlobalIndex) or (isinstance(n, ir.Var) and n.name in varying)
            for n in ir.walk_expr(e)
        )

    changed = True
    while changed:
        changed = False

        def visit(stmts: tuple[ir.Stmt, ...], under: bool) -> None:
            nonlocal changed
            for s in stmts:
                if isinstance(s, ir.Assign):
                    if s.var.name not in varying and (under or dep(s.value)):
                        varying.add(s.var.name)
                        changed = True
                elif isinstance(s, ir.If):
                    inner = under or dep(s.cond)
                    visit(s.then, inner)
                    visit(s.orelse, inner)
                elif isinstance(s, ir.For):
                    bounds = dep(s.start) or dep(s.stop)
                    if bounds and s.var.name not in varying:
                        varying.add(s.var.name)
                        changed = True
                    visit(s.body, under or bounds)

        visit(k.body, False)
    return varying


def _accumulated_operand(s: ir.Assign) -> ir.Expr:
    v = s.value
    if isinstance(v, ir.Binary):
        return v.b if v.a == s.var else v.a
    assert isinstance(v, ir.Call)
    return v.args[1] if v.args[0] == s.var else v.args[0]


def _accumulation(s: ir.Assign) -> str | None:
    """The reduce op if ``s`` is ``acc = acc (+|*|max|min) e`` with ``e`` free of ``acc``."""
    v, acc = s.value, s.var
    if isinstance(v, ir.Binary) and v.op in ("add", "mul"):
        pair, op = (v.a, v.b), v.op
    elif isinstance(v, ir.Call) and v.fn in ("min", "max"):
        pair, op = v.args, v.fn
    else:
        return None
    if pair[0] == acc:
        other = pair[1]
    elif pair[1] == acc and op != "sub":
        other = pair[0]
    else:
        return None
    if any(n == acc for n in ir.walk_expr(other)):
        return None
    return op


def _plan_nest(loop: ir.For, k: ir.KernelIR, varying: set[str], R: int) -> _Nest | None:
    """A plan to vectorise ``loop`` along extra axes, or None when it is not a pure reduction."""
    loops: list[ir.For] = []
    accs: dict[str, str] = {}
    inside_assigned: set[str] = set()
    ok = True

    def scan(stmts: tuple[ir.Stmt, ...]) -> None:
        nonlocal ok
        for s in stmts:
            if isinstance(s, ir.For):
                if not (isinstance(s.start, ir.Const) and isinstance(s.stop, ir.Const)):
                    ok = False
                    return
                loops.append(s)
                inside_assigned.add(s.var.name)
                scan(s.body)
            elif isinstance(s, ir.If):
                scan(s.then)
                scan(s.orelse)
            elif isinstance(s, ir.Assign):
                inside_assigned.add(s.var.name)
            else:
                ok = False
                return

    scan((loop,))
    if not ok:
        return None
    # Variables referenced outside the nest are accumulators (or forbid vectorising).
    outside_refs: set[str] = set()
    nest_ids = {id(s) for s in ir.walk_stmts((loop,))}
    for s in ir.walk_stmts(k.body):
        if id(s) in nest_ids:
            continue
        for e in ir.stmt_exprs(s):
            outside_refs |= {n.name for n in ir.walk_expr(e) if isinstance(n, ir.Var)}
        if isinstance(s, ir.Assign | ir.For):
            outside_refs.add(s.var.name)
    for s in ir.walk_stmts((loop,)):
        if isinstance(s, ir.Assign) and s.var.name in outside_refs:
            op = _accumulation(s)
            if op is None or accs.get(s.var.name, op) != op or s.var.name not in varying:
                return None
            accs[s.var.name] = op
    if not accs:
        return None
    # Accumulators may only appear as the accumulated operand; temporaries must be
    # assigned before they are read within one iteration, in the same or an outer scope.
    reads: set[str] = set()

    def check(stmts: tuple[ir.Stmt, ...], defined: set[str]) -> bool:
        defined = set(defined)
        for s in stmts:
            if isinstance(s, ir.For):
                if not check(s.body, defined | {s.var.name}):
                    return False
                continue
            exprs = (
                [s.cond]
                if isinstance(s, ir.If)
                else [_accumulated_operand(s) if s.var.name in accs else s.value]
            )
            for e in exprs:
                for n in ir.walk_expr(e):
                    if isinstance(n, ir.Var):
                        if n.name in accs:
                            return False
                        if n.name in inside_assigned and n.name not in defined:
                            return False
                        reads.add(n.name)
            if isinstance(s, ir.If):
                if not (check(s.then, defined) and check(s.orelse, defined)):
                    return False
            elif s.var.name not in accs:
                defined.add(s.var.name)
        return True

    if not check((loop,), set()):
        return None
    axes = {lp.var.name: R + i for i, lp in enumerate(loops)}
    ranges = []
    trip = 1
    for lp in loops:
        count = trip_count(int(lp.start.value), int(lp.stop.value), lp.step)
        ranges.append((int(lp.start.value), count, lp.step))
        trip *= max(count, 1)
    outer = {n for n in reads if n not in inside_assigned}
    return _Nest(axes, ranges, accs, outer, trip)
