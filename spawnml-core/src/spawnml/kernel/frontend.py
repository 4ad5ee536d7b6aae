"""``@kernel`` and ``@helper``: parse a Python function and check it is in the language.

Syntax is checked when the decorator runs (``KernelSyntaxError`` names the file and line);
types are checked when the kernel is specialised for concrete shapes and dtypes.
"""

from __future__ import annotations

import ast
import collections
import functools
import inspect
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KernelSyntaxError
from .intrinsics import INTRINSICS, SPECIAL_CALLS


class Tensor:
    """Annotation: a read-only input tensor (``x[i, j]``, ``x.flat[i]``, ``x.shape`` ...)."""


class Output:
    """Annotation: the output; ``out.index`` / ``out.flat`` locate this invocation's element."""


def static_range(*args: int) -> range:
    """A ``range`` unrolled at specialisation time; its bounds must be compile-time constants."""
    return range(*args)


def cast(x: Any, t: Any) -> Any:  # pragma: no cover - marker for editors
    """Convert ``x`` to type ``t`` (f32, f16, i32, u32, i64, boolean, or ``tensor.dtype``)."""
    raise RuntimeError("cast() is a kernel-language intrinsic; call it inside a @kernel")


def cast_like(x: Any, like: Any) -> Any:  # pragma: no cover - marker for editors
    """Convert ``x`` to the type of the runtime value ``like`` (ONNX CastLike)."""
    raise RuntimeError("cast_like() is a kernel-language intrinsic; call it inside a @kernel")


def bitcast(x: Any, t: Any) -> Any:  # pragma: no cover - marker for editors
    """Reinterpret the bits of a 32-bit value as another 32-bit type."""
    raise RuntimeError("bitcast() is a kernel-language intrinsic; call it inside a @kernel")


@dataclass(frozen=True)
class Location:
    kernel: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class _Source:
    """The parsed source of a kernel or helper function and how to name its lines."""

    def __init__(self, fn: Callable[..., Any], what: str) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.what = what
        try:
            lines, first = inspect.getsourcelines(fn)
            self.file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as exc:
            raise KernelSyntaxError(
                f"{what} {fn.__name__!r}: its source is not available ({exc}); kernels are "
                "parsed from their source, so define them in a file (a module or script) and "
                "import or run it, not at the interactive prompt or in exec() of a string"
            ) from None
        self.first_line = first
        tree = ast.parse(textwrap.dedent("".join(lines)))
        node = tree.body[0]
        if not isinstance(node, ast.FunctionDef):
            raise KernelSyntaxError(f"{what} {fn.__name__!r}: expected a plain 'def' function")
        self.tree = node

    def line(self, node: ast.AST) -> int:
        return self.first_line + getattr(node, "lineno", 1) - 1

    @functools.cached_property
    def bound_once(self) -> frozenset[str]:
        """Names the function binds at exactly one place (a parameter counts as one): every
        value such a name ever holds is that one expression's (or the zero locals start at),
        so a property of the expression, such as being non-negative, holds for the name."""
        sites: collections.Counter[str] = collections.Counter(a.arg for a in self.tree.args.args)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                sites[node.id] += 1  # x += 1 binds x again (its earlier binding is another)
        return frozenset(name for name, n in sites.items() if n == 1)

    def loc(self, node: ast.AST) -> Location:
        return Location(self.name, self.file, self.line(node))

    def error(
        self, node: ast.AST, message: str, cls: type[Exception] = KernelSyntaxError
    ) -> Exception:
        return cls(f"{self.what} {self.name!r} ({self.file}:{self.line(node)}): {message}")

    def lookup_global(self, name: str) -> tuple[bool, Any]:
        """Resolve a free name in the function's closure or module (found, value)."""
        code = self.fn.__code__
        if self.fn.__closure__ and name in code.co_freevars:
            cell = self.fn.__closure__[code.co_freevars.index(name)]
            try:
                return True, cell.cell_contents
            except ValueError:
                return False, None
        if name in self.fn.__globals__:
            return True, self.fn.__globals__[name]
        builtins = self.fn.__globals__.get("__builtins__")
        table = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        if name in table:
            return True, table[name]
        return False, None


_ALLOWED_ATTRS = {
    "tensor": {"shape", "ndim", "size", "strides", "dtype", "flat"},
    "output": {"shape", "ndim", "size", "strides", "dtype", "flat", "index"},
}
_MATH_CONSTANTS = {"pi", "e", "tau", "inf", "nan"}
_MATH_FUNCTIONS = set(INTRINSICS) | {"fabs", "isfinite"}


def _body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    """A function's statements after its docstring."""
    body = fn.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


class _SyntaxChecker(ast.NodeVisitor):
    """Rejects everything outside the kernel language, at decoration time."""

    def __init__(self, src: _Source, kinds: Mapping[str, str], is_helper: bool) -> None:
        self.src = src
        self.kinds = kinds  # parameter name -> "tensor" | "output" | "const" | "any"
        self.is_helper = is_helper

    def fail(self, node: ast.AST, message: str) -> None:
        raise self.src.error(node, message)

    def check(self) -> None:
        fn = self.src.tree
        if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.posonlyargs:
            self.fail(
                fn,
                "*args, **kwargs and keyword-only parameters are not allowed; "
                "list every parameter explicitly",
            )
        body = _body_without_docstring(fn)
        if not body:
            self.fail(fn, "the body is empty; a kernel must return the output element's value")
        for stmt in body:
            self.visit(stmt)
        if self.is_helper:
            self._check_tail_returns(body, tail=True)

    def _check_tail_returns(self, body: list[ast.stmt], tail: bool) -> None:
        for i, stmt in enumerate(body):
            last = tail and i == len(body) - 1
            if isinstance(stmt, ast.Return) and not last:
                self.fail(
                    stmt,
                    "a helper may only return at its end (or at the end of both "
                    "branches of a final if/else)",
                )
            if isinstance(stmt, ast.If):
                self._check_tail_returns(stmt.body, last)
                self._check_tail_returns(stmt.orelse, last)
            if isinstance(stmt, ast.For):
                self._check_tail_returns(stmt.body, False)

    # -- statements -------------------------------------------------------------------
    def generic_visit(self, node: ast.AST) -> None:
        name = type(node).__name__
        hints = {
            "While": "while loops are not part of the kernel language; use 'for i in range(...)' "
            "with a bound",
            "Break": "break is not allowed; return early or guard the loop body with if",
            "Continue": "continue is not allowed; guard the rest of the loop body with if",
            "FunctionDef": "nested functions are not allowed; define a module-level @helper",
            "Lambda": "lambda is not allowed; define a module-level @helper",
            "ListComp": "comprehensions are not allowed; use a for loop",
            "GeneratorExp": "generator expressions are not allowed; use a for loop",
            "Try": "try/except is not allowed in kernels",
            "With": "with-statements are not allowed in kernels",
            "Raise": "raise is not allowed in kernels",
            "Import": "imports are not allowed inside kernels",
            "ImportFrom": "imports are not allowed inside kernels",
            "Global": "global/nonlocal are not allowed in kernels",
            "Nonlocal": "global/nonlocal are not allowed in kernels",
            "List": "lists are not allowed; use a tuple of compile-time values",
            "Dict": "dicts are not allowed in kernels",
            "Set": "sets are not allowed in kernels",
            "JoinedStr": "strings are not allowed in kernels",
            "Await": "async code is not allowed in kernels",
            "Yield": "generators are not allowed in kernels",
            "Delete": "del is not allowed in kernels",
            "NamedExpr": "the walrus operator is not allowed; assign on its own line",
            "Starred": "starred expressions are not allowed in kernels",
            "AnnAssign": "annotated assignments are not allowed; use cast(value, type)",
            "Assert": "assert is not allowed in kernels",
        }
        message = hints.get(name, f"'{name}' is not part of the kernel language")
        self.fail(node, message)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Expr(self, node: ast.Expr) -> None:
        self.fail(
            node,
            "an expression statement has no effect in a kernel (kernels cannot call "
            "functions for side effects)",
        )

    def _check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if self.kinds.get(target.id) in ("tensor", "output"):
                self.fail(target, f"cannot assign to parameter {target.id!r}")
            return
        if isinstance(target, ast.Tuple):
            for elt in target.elts:
                self._check_target(elt)
            return
        if isinstance(target, ast.Subscript):
            self.fail(
                target,
                "scatter writes (assigning to a tensor element) are not allowed; "
                "kernels are gather-style: return the output element's value instead",
            )
        if isinstance(target, ast.Attribute):
            self.fail(target, "assigning to an attribute is not allowed in kernels")
        self.fail(target, f"cannot assign to '{type(target).__name__}'")

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            self.fail(node, "chained assignment (a = b = ...) is not allowed")
        self._check_target(node.targets[0])
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            self._check_target(node.target)
            self.fail(node.target, "augmented assignment needs a plain variable")
        self._check_target(node.target)
        self._binop(node, node.op)
        self.visit(node.value)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        for s in node.body + node.orelse:
            self.visit(s)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            self.fail(node, "for ... else is not allowed")
        if not isinstance(node.target, ast.Name):
            self.fail(node.target, "the loop variable must be a single name")
        it = node.iter
        is_range = (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id in ("range", "static_range")
        )
        if is_range:
            if not 1 <= len(it.args) <= 3 or it.keywords:
                self.fail(it, "range() takes 1 to 3 positional arguments")
            for arg in it.args:
                self.visit(arg)
        else:
            self.visit(it)  # a compile-time tuple, unrolled; checked at specialisation
        for s in node.body:
            self.visit(s)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is None:
            self.fail(node, "return needs a value: the output element (kernel) or result (helper)")
        self.visit(node.value)

    # -- expressions ------------------------------------------------------------------
    def _binop(self, node: ast.AST, op: ast.operator) -> None:
        if isinstance(op, ast.MatMult):
            self.fail(node, "'@' is not allowed; write the loop")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._binop(node, node.op)
        self.visit(node.left)
        self.visit(node.right)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        self.visit(node.operand)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        for v in node.values:
            self.visit(v)

    def visit_Compare(self, node: ast.Compare) -> None:
        for op in node.ops:
            if isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn):
                self.fail(
                    node,
                    f"'{type(op).__name__}' comparisons are not allowed; use ==, !=, <, <=, >, >=",
                )
        self.visit(node.left)
        for c in node.comparators:
            self.visit(c)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, bool | int | float):
            self.fail(
                node, f"constant {node.value!r} is not allowed; kernels use numbers and bools"
            )

    def visit_Name(self, node: ast.Name) -> None:
        pass

    def visit_Tuple(self, node: ast.Tuple) -> None:
        for e in node.elts:
            self.visit(e)

    def visit_Slice(self, node: ast.Slice) -> None:
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                self.visit(part)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.visit(node.value)
        self.visit(node.slice)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
        if isinstance(base, ast.Name) and base.id == "math":
            if node.attr not in _MATH_CONSTANTS | _MATH_FUNCTIONS:
                self.fail(node, f"math.{node.attr} is not available in kernels")
            return
        if isinstance(base, ast.Name) and base.id in self.kinds:
            kind = self.kinds[base.id]
            allowed = _ALLOWED_ATTRS.get(kind)
            if allowed is not None and node.attr not in allowed:
                self.fail(
                    node,
                    f"{base.id}.{node.attr} does not exist; a {kind} has "
                    f"{', '.join(sorted(allowed))}",
                )
            return
        if isinstance(base, ast.Name):
            return  # a helper's parameter or a module-level constant: checked at specialisation
        self.fail(
            node,
            f"attribute access '.{node.attr}' is only allowed on tensors, the "
            "output and the math module",
        )

    def visit_Call(self, node: ast.Call) -> None:
        if node.keywords:
            self.fail(node, "keyword arguments are not allowed in kernel calls")
        func = node.func
        if isinstance(func, ast.Attribute):
            if not (isinstance(func.value, ast.Name) and func.value.id == "math"):
                self.fail(
                    node,
                    "method calls are not allowed; only intrinsics, math.<fn> and "
                    "@helper functions can be called",
                )
            self.visit_Attribute(func)
        elif isinstance(func, ast.Name):
            name = func.id
            if name in ("range", "static_range"):
                self.fail(node, f"{name}() may only appear as a for-loop iterable")
            internal = (
                name in ("_rawdiv", "_rawmod")
                and self.src.fn.__module__ == "spawnml.kernel.polyfills"
            )
            if name not in INTRINSICS and name not in SPECIAL_CALLS and not internal:
                found, value = self.src.lookup_global(name)
                if found and not isinstance(value, Helper | Kernel):
                    self.fail(
                        node,
                        f"call of {name!r} ({type(value).__name__}): only intrinsics "
                        f"and @helper functions can be called; allowed intrinsics: "
                        f"{', '.join(sorted(INTRINSICS))}, cast, bitcast",
                    )
                if found and isinstance(value, Kernel):
                    self.fail(node, f"{name!r} is a @kernel; call @helper functions instead")
        else:
            self.fail(node, "only named functions can be called")
        if (
            isinstance(func, ast.Name)
            and func.id == "float"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return  # float("nan") / float("inf"): checked at specialisation
        for arg in node.args:
            self.visit(arg)


def _param_kind(src: _Source, param: inspect.Parameter) -> str:
    ann = param.annotation
    if ann is Tensor or ann == "Tensor":
        return "tensor"
    if ann is Output or ann == "Output":
        return "output"
    if ann in (int, float, bool, tuple) or ann in ("int", "float", "bool", "tuple"):
        return "const"
    if ann is Helper or ann == "Helper":
        return "const"
    if getattr(ann, "__origin__", None) is tuple or (
        isinstance(ann, str) and ann.startswith("tuple")
    ):
        return "const"
    node = next((a for a in src.tree.args.args if a.arg == param.name), src.tree)
    found = "no annotation" if ann is inspect.Parameter.empty else f"annotation {ann!r}"
    raise src.error(
        node,
        f"parameter {param.name!r} has {found}; kernel parameters must be annotated Tensor, "
        "Output, int, float, bool, tuple or Helper",
    )


class Helper:
    """A function inlined into kernels that call it. Parameters need no annotations."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.src = _Source(fn, "helper")
        self.signature = inspect.signature(fn)
        kinds = {p: "any" for p in self.signature.parameters}
        _SyntaxChecker(self.src, kinds, is_helper=True).check()

    def __call__(self, *args: Any) -> Any:
        raise RuntimeError(f"@helper {self.name} can only be called inside a @kernel")

    def __repr__(self) -> str:
        return f"<helper {self.name} at {self.src.file}:{self.src.first_line}>"


def helper(fn: Callable[..., Any]) -> Helper:
    """Mark a function as a kernel helper: called from kernels, inlined at specialisation."""
    return Helper(fn)


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: Any


class Kernel:
    """A gather-style kernel: computes one output element per invocation."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.src = _Source(fn, "kernel")
        self.signature = inspect.signature(fn)
        self.kinds = {n: _param_kind(self.src, p) for n, p in self.signature.parameters.items()}
        outputs = [n for n, k in self.kinds.items() if k == "output"]
        if len(outputs) != 1:
            raise self.src.error(
                self.src.tree,
                f"a kernel has exactly one Output parameter; found {len(outputs)}",
            )
        self.output_name = outputs[0]
        self.tensor_names = [n for n, k in self.kinds.items() if k == "tensor"]
        self.const_names = [n for n, k in self.kinds.items() if k == "const"]
        _SyntaxChecker(self.src, self.kinds, is_helper=False).check()
        self._cache: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return f"{self.src.file}:{self.src.first_line}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"@kernel {self.name} is not called directly; specialise it with .specialize(...) "
            "and launch it on a backend (spawnml.kernel.run_kernel)"
        )

    def specialize(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        output: Any,
        **consts: Any,
    ) -> Any:
        """The KernelIR for concrete input/output shapes and dtypes and constant values.

        ``inputs`` maps tensor parameter names (or lists them in order) to anything with
        ``.shape`` and ``.dtype`` (numpy arrays, TensorSpec, DeviceTensor) or (shape, dtype).
        """
        from .specialize import specialize

        return specialize(self, inputs, output, consts)

    def __repr__(self) -> str:
        return f"<kernel {self.name} at {self.location}>"


def kernel(fn: Callable[..., Any]) -> Kernel:
    """Decorate a gather-style kernel written in the kernel language (see docs/kernels.md)."""
    return Kernel(fn)
