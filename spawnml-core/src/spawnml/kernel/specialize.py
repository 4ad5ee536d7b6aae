"""Specialisation entry points: a parsed kernel + concrete shapes, dtypes and constants -> typed IR.

Compile-time values (Python ints, floats, bools, tuples, tensor shapes) are folded as the
tree is walked; ``static_range`` loops are unrolled and ``if`` on a compile-time condition
keeps only the branch taken. Everything else becomes typed IR. A name bound to a
compile-time value that is reassigned inside a runtime loop or branch is promoted to a
runtime variable (the walk restarts with that name marked runtime).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import trim_lru
from ..errors import KernelTypeError
from . import ir
from .frontend import Helper, Kernel
from .spec_stmts import Specializer as _Specializer
from .spec_support import _body_without_docstring, _is_const, _Promote, _Scope, _spec_of
from .types import ScalarType, compute_type

#: Specialisations a kernel keeps (least recently used dropped first): one per distinct
#: shape/dtype/constant combination, so a session fed many shapes stays bounded.
MAX_SPECIALISATIONS = 256

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
        cached = k._cache.pop(cache_key, None)
        if cached is not None:
            k._cache[cache_key] = cached  # most recently used last
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
        trim_lru(k._cache, MAX_SPECIALISATIONS)
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
