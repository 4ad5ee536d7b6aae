"""A tree-walking evaluator of spawnml's kernel IR over numpy "lanes".

A kernel computes one output element per invocation. Instead of looping over invocations,
every expression is evaluated for all of them at once (one numpy element per lane), and
control flow becomes masks: ``if`` runs each branch on the lanes whose condition holds, a
loop runs while any lane is still inside its range, and ``return`` retires lanes. This is
how SIMT hardware runs divergent code, written in a page of Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import ir
from spawnml.kernel.polyfills import function_name, required_functions
from spawnml.kernel.types import ScalarType

# Intrinsics numpy computes with the language's semantics; the rest (erf, NaN-propagating
# min/max, the integer divisions, ...) come from spawnml's polyfills, written in the kernel
# language itself, so this backend needs no code for them.
_FLOAT_NATIVE: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "round": np.rint, "pow": np.power,
    "atan2": np.arctan2, "isnan": np.isnan, "isinf": np.isinf, "fmod": np.fmod,
    "pymod": np.mod,
}


def _np(t: ScalarType) -> np.dtype:
    """The numpy type lanes of kernel type ``t`` hold: f16 is computed in f32 (this backend
    declares no f16 arithmetic) and rounded to f16 on every cast and on store."""
    return np.dtype(np.float32) if t is ScalarType.f16 else t.numpy


def _native(fn: str, t: ScalarType) -> bool:
    return t.is_float and fn in _FLOAT_NATIVE


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "and": np.logical_and, "or": np.logical_or,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}


@dataclass
class _Frame:
    """One kernel or function activation: its variables, result, and lanes still running."""

    env: dict[str, np.ndarray]
    result: np.ndarray
    live: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)


class Program:
    """A kernel ready to run: the IR plus the polyfill functions it calls."""

    def __init__(self, kernel: ir.KernelIR, storage_dtype: Callable[[DType], DType]) -> None:
        self.kernel = kernel
        self.functions = {f.name: f for f in required_functions(kernel.body, _native)}
        self.storage = [storage_dtype(b.dtype).numpy for b in kernel.inputs]
        self.out_storage = storage_dtype(kernel.output.dtype).numpy

    def run(self, out: np.ndarray, inputs: list[np.ndarray]) -> None:
        """Compute every output element and write it (in its storage dtype) into ``out``."""
        k = self.kernel
        n = k.output.size
        self.inputs = [
            raw[: spec.size * st.itemsize].view(st).astype(_np(spec.type))
            for raw, spec, st in zip(inputs, k.inputs, self.storage)
        ]
        self.lanes = n
        self.gid = np.arange(n, dtype=np.int32)
        frame = self._frame(k.locals, k.output.type)
        with np.errstate(all="ignore"):
            self._block(k.body, frame, np.ones(n, bool))
            result = frame.result
            if self.out_storage == np.bool_:
                result = result != 0
            stored = result.astype(self.out_storage)
        out[: stored.nbytes] = stored.view(np.uint8)

    # -- statements -------------------------------------------------------------------------
    def _frame(self, local_vars: tuple[ir.Var, ...], ret: ScalarType) -> _Frame:
        env = {v.name: np.zeros(self.lanes, _np(v.type)) for v in local_vars}
        return _Frame(env, np.zeros(self.lanes, _np(ret)), np.ones(self.lanes, bool))

    def _block(self, body: tuple[ir.Stmt, ...], frame: _Frame, mask: np.ndarray) -> None:
        for s in body:
            m = mask & frame.live
            if not m.any():
                return
            self._stmt(s, frame, m)

    def _stmt(self, s: ir.Stmt, f: _Frame, m: np.ndarray) -> None:
        if isinstance(s, ir.Assign):
            f.env[s.var.name] = np.where(m, self._eval(s.value, f), f.env[s.var.name])
        elif isinstance(s, ir.If):
            cond = np.broadcast_to(self._eval(s.cond, f), m.shape)
            self._block(s.then, f, m & cond)
            self._block(s.orelse, f, m & ~cond)
        elif isinstance(s, ir.For):
            t = _np(s.var.type)
            start = np.broadcast_to(self._eval(s.start, f).astype(t), m.shape)
            stop = np.broadcast_to(self._eval(s.stop, f).astype(t), m.shape)
            i = start.copy()
            while True:
                inside = m & f.live & ((i < stop) if s.step > 0 else (i > stop))
                if not inside.any():
                    break
                f.env[s.var.name] = np.where(inside, i, f.env[s.var.name])
                self._block(s.body, f, inside)
                i = (i + s.step).astype(t)
        elif isinstance(s, ir.Return):
            f.result = np.where(m, self._eval(s.value, f), f.result).astype(f.result.dtype)
            f.live = f.live & ~m
        else:  # pragma: no cover - the IR has no other statements
            raise TypeError(f"unknown statement {s!r}")

    # -- expressions ------------------------------------------------------------------------
    def _eval(self, e: ir.Expr, f: _Frame) -> np.ndarray:
        t = _np(e.type)
        if isinstance(e, ir.Const):
            return np.asarray(e.value, dtype=t)
        if isinstance(e, ir.Var):
            return f.env[e.name]
        if isinstance(e, ir.GlobalIndex):
            return self.gid
        if isinstance(e, ir.Load):
            data = self.inputs[e.buffer]
            if data.size == 0:
                return np.zeros(self.lanes, t)
            # Lanes masked off may hold any index: clip so they read something harmless.
            return data[np.clip(self._eval(e.index, f), 0, data.size - 1)]
        if isinstance(e, ir.Unary):
            x = self._eval(e.x, f)
            return (np.negative(x) if e.op == "neg" else np.invert(x)).astype(t)
        if isinstance(e, ir.Binary):
            return self._binary(e.op, self._eval(e.a, f), self._eval(e.b, f)).astype(t)
        if isinstance(e, ir.Select):
            return np.where(self._eval(e.cond, f), self._eval(e.a, f), self._eval(e.b, f)).astype(t)
        if isinstance(e, ir.Cast):
            x = self._eval(e.x, f)
            if e.type is ScalarType.bool:
                return x != 0
            if e.type is ScalarType.f16:
                return x.astype(np.float16).astype(t)
            return x.astype(t)
        if isinstance(e, ir.Bitcast):
            return np.ascontiguousarray(self._eval(e.x, f)).view(t)
        if isinstance(e, ir.Call):
            return self._call(e, f)
        raise TypeError(f"unknown expression {e!r}")  # pragma: no cover

    def _binary(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if op in _BINARY:
            return _BINARY[op](a, b)
        if op == "div" and a.dtype.kind == "f":
            return np.divide(a, b)
        if op in ("div", "mod"):  # C semantics; the IR only divides by safe constants here
            q = np.floor_divide(a, b)
            q = np.where((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)), q + 1, q)
            return q if op == "div" else a - q * b
        bits = a.dtype.itemsize * 8
        shift = np.bitwise_and(b, bits - 1).astype(a.dtype)
        return np.left_shift(a, shift) if op == "shl" else np.right_shift(a, shift)

    def _call(self, e: ir.Call, f: _Frame) -> np.ndarray:
        args = [self._eval(a, f) for a in e.args]
        t = e.args[0].type
        if _native(e.fn, t):
            return np.asarray(_FLOAT_NATIVE[e.fn](*args)).astype(_np(e.type))
        fn = self.functions[function_name(e.fn, t)]
        callee = self._frame(fn.locals, fn.ret)
        for p, a in zip(fn.params, args):
            callee.env[p.name] = np.broadcast_to(a, (self.lanes,)).astype(_np(p.type))
        self._block(fn.body, callee, f.live.copy())
        return callee.result
