"""The typed tree IR that every renderer consumes.

A specialised kernel is a :class:`KernelIR`: its input and output buffers with concrete
shapes and dtypes, its local variables, and a body of statements. Expressions are immutable
and typed. Every invocation computes one element of the output, at flat index
:class:`GlobalIndex`; a :class:`Return` statement writes that element and ends the invocation.

Integer ``div``/``mod`` in :class:`Binary` are C-style truncating operations and appear only
where the divisor is known to be safe (a constant other than 0 and -1); everything else goes
through the intrinsics ``floordiv``/``floormod``/``truncdiv``/``truncmod`` (see docs/kernels.md).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..dtypes import DType
from .types import ScalarType

# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    type: ScalarType


@dataclass(frozen=True)
class Const(Expr):
    value: bool | int | float


@dataclass(frozen=True)
class Var(Expr):
    name: str


@dataclass(frozen=True)
class GlobalIndex(Expr):
    """The flat index of the output element this invocation computes (i32, >= 0)."""


@dataclass(frozen=True)
class Load(Expr):
    """Element ``index`` (flat, i32) of input buffer number ``buffer``. ``in_range``: the
    value ranges (``spawnml.kernel.ranges``) prove the index inside the buffer, so a target
    that guards its reads (Wasm clamps them) may read directly."""

    buffer: int
    index: Expr
    in_range: bool = field(default=False, repr=False)  # not in fingerprints: set after them


class Op(str, enum.Enum):
    """The operators of :class:`Unary` and :class:`Binary`.

    A ``str`` enum, so ``e.op == "add"`` and tables keyed by the old strings keep working;
    it prints and reprs as the string, so kernel fingerprints do not change.
    """

    NEG = "neg"
    NOT = "not"
    INVERT = "invert"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    BITAND = "bitand"
    BITOR = "bitor"
    BITXOR = "bitxor"
    SHL = "shl"
    SHR = "shr"
    AND = "and"
    OR = "or"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"

    def __repr__(self) -> str:
        return repr(self.value)

    __str__ = str.__str__
    __format__ = str.__format__


UNARY_OPS = (Op.NEG, Op.NOT, Op.INVERT)
ARITH_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD)
BIT_OPS = (Op.BITAND, Op.BITOR, Op.BITXOR, Op.SHL, Op.SHR)
LOGIC_OPS = (Op.AND, Op.OR)
COMPARE_OPS = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)


@dataclass(frozen=True)
class Unary(Expr):
    op: Op  # one of UNARY_OPS (a plain string is converted)
    x: Expr

    def __post_init__(self) -> None:
        if type(self.op) is not Op:
            object.__setattr__(self, "op", Op(self.op))


@dataclass(frozen=True)
class Binary(Expr):
    op: Op  # ARITH_OPS, BIT_OPS, LOGIC_OPS or COMPARE_OPS (a plain string is converted)
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        if type(self.op) is not Op:
            object.__setattr__(self, "op", Op(self.op))


@dataclass(frozen=True)
class Select(Expr):
    """``a if cond else b``; both sides may be evaluated."""

    cond: Expr
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Cast(Expr):
    """Value conversion (float->int truncates toward zero)."""

    x: Expr


@dataclass(frozen=True)
class Bitcast(Expr):
    """Reinterpret the bits of a 32-bit value as another 32-bit type."""

    x: Expr


@dataclass(frozen=True)
class Call(Expr):
    """An intrinsic, by name (see ``spawnml.kernel.intrinsics``)."""

    fn: str
    args: tuple[Expr, ...]


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Stmt:
    line: int


@dataclass(frozen=True)
class Assign(Stmt):
    var: Var
    value: Expr


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class For(Stmt):
    """``for var in range(start, stop, step)``; ``step`` is a non-zero constant and
    ``start``/``stop`` are evaluated once, before the first iteration."""

    var: Var
    start: Expr
    stop: Expr
    step: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Store(Stmt):
    """Write output element ``index`` (flat, i32), one of this invocation's own: kernels
    with a register tile (``KernelIR.tile``) end in one store per element of the block."""

    index: Expr
    value: Expr


@dataclass(frozen=True)
class Return(Stmt):
    """Write the output element (in a kernel) or return the value (in a function)."""

    value: Expr


# ----------------------------------------------------------------------------- vectors
# Produced only by ``spawnml.kernel.vectorize`` right before printing, for targets whose
# traits declare vector arithmetic; no pass before it sees them. A vector has ``lanes``
# elements of one scalar type; lane ``j`` of a vector variable is the scalar variable that
# copy ``j`` of a register tile used (``KernelIR.vectors`` maps them).


@dataclass(frozen=True)
class VecExpr:
    type: ScalarType  # the lane type
    lanes: int


@dataclass(frozen=True)
class VecRef(VecExpr):
    """The vector variable ``name``."""

    name: str


@dataclass(frozen=True)
class VecSplat(VecExpr):
    """Every lane the scalar ``x``."""

    x: Expr


@dataclass(frozen=True)
class VecLanes(VecExpr):
    """Lane ``j`` the scalar ``xs[j]``."""

    xs: tuple[Expr, ...]


@dataclass(frozen=True)
class VecLoad(VecExpr):
    """Elements ``index``, ``index + stride``, .., ``index + (lanes - 1) * stride`` of input
    ``buffer`` (``index`` scalar i32; a stride above 1 only where the target's traits allow)."""

    buffer: int
    index: Expr
    in_range: bool = False  # every lane's read is proven inside the buffer
    stride: int = 1


@dataclass(frozen=True)
class VecBinary(VecExpr):
    """Lane-wise arithmetic (``Op.ADD``/``SUB``/``MUL``/``DIV``)."""

    op: Op
    a: VecExpr
    b: VecExpr


@dataclass(frozen=True)
class VecCall(VecExpr):
    """Lane-wise intrinsic ``fn`` (one the target's traits list in ``vector_calls``: its
    vector form gives every lane exactly the scalar result)."""

    fn: str
    args: tuple[VecExpr, ...]


@dataclass(frozen=True)
class VecAssign(Stmt):
    """Vector variable ``name`` = ``value`` (a ``VecExpr``); printed only by targets whose
    traits set ``vector_width`` above 1, like ``VecStore``."""

    name: str
    value: VecExpr


@dataclass(frozen=True)
class VecStore(Stmt):
    """Write output elements ``index`` .. ``index + lanes - 1`` (``vector_width`` targets)."""

    index: Expr
    value: VecExpr


@dataclass(frozen=True)
class VectorVar:
    """A vector variable and the scalar variables that are its lanes, in lane order."""

    name: str
    type: ScalarType
    lane_names: tuple[str, ...]


# ----------------------------------------------------------------------------- containers


@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: DType
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def type(self) -> ScalarType:
        from .types import compute_type

        t = compute_type(self.dtype)
        assert t is not None
        return t


@dataclass(frozen=True)
class Function:
    """A helper function (a polyfill) rendered once per target and called by name."""

    name: str
    params: tuple[Var, ...]
    ret: ScalarType
    locals: tuple[Var, ...]
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class KernelIR:
    """A kernel specialised for concrete shapes, dtypes and constants."""

    name: str
    inputs: tuple[BufferSpec, ...]
    output: BufferSpec
    locals: tuple[Var, ...]
    body: tuple[Stmt, ...]
    source: str = ""  # "file:line" of the kernel definition
    key: str = field(default="", compare=False)
    functions: tuple[Function, ...] = field(default=(), compare=False)
    """Polyfill functions the body calls, callees first; filled by the lowering passes
    (``spawnml.kernel.passes``) for one target, empty in a freshly specialised kernel."""
    tile: tuple[int, ...] = ()
    """Outputs per invocation along each output axis (``spawnml.kernel.tile``); empty: one.
    A tiled kernel's ``GlobalIndex`` numbers the invocations and it writes with ``Store``."""
    lane_groups: tuple[tuple[str, ...], ...] = field(default=(), compare=False)
    """Set by the tile: per variable and block row, the names its copies along the innermost
    tiled axis use, in order (candidates for vectors; see ``spawnml.kernel.vectorize``)."""
    vectors: tuple[VectorVar, ...] = field(default=(), compare=False)
    """Vector variables (``spawnml.kernel.vectorize``); their lanes are not in ``locals``."""

    @property
    def size(self) -> int:
        """The number of invocations (output elements, or blocks of them when tiled)."""
        if not self.tile:
            return self.output.size
        n = 1
        for extent, t in zip(self.output.shape, self.tile):
            n *= -(-extent // t)
        return n

    def fingerprint(self) -> str:
        return hashlib.sha256(
            repr((self.name, self.inputs, self.output, self.locals, self.body)
                 + ((self.tile,) if self.tile else ())).encode()
        ).hexdigest()[:16]


# ----------------------------------------------------------------------------- traversal


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return (e.index,)
    if isinstance(e, Unary | Cast | Bitcast):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Call):
        return e.args
    return ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    """Every sub-expression of ``e``, ``e`` first."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    if isinstance(s, Assign):
        return (s.value,)
    if isinstance(s, If):
        return (s.cond,)
    if isinstance(s, For):
        return (s.start, s.stop)
    if isinstance(s, Return):
        return (s.value,)
    if isinstance(s, Store):
        return (s.index, s.value)
    return ()


def walk_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement in ``body``, nested ones included, in source order."""
    for s in body:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.then)
            yield from walk_stmts(s.orelse)
        elif isinstance(s, For):
            yield from walk_stmts(s.body)


def all_exprs(body: tuple[Stmt, ...]) -> Iterator[Expr]:
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            yield from walk_expr(e)
