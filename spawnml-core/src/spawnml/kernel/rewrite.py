"""The one generic tree rewriter: pattern -> replacement rules, applied to a fixed point.

A rule is a node class (or a tuple of them) and a function from a matching node to its
replacement, or ``None`` when the rule does not apply. :func:`rewrite_kernel` rewrites a
kernel bottom-up: children first, then the rules at each node until none applies, and a
replacement's new children are rewritten the same way (tinygrad's ``graph_rewrite``). Every
core pass (``spawnml.kernel.passes``) and every target's own rewrites are such rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from . import ir

N = TypeVar("N")
Rule = tuple[type | tuple[type, ...], Callable[[Any], Any]]


class PatternMatcher:
    """Rules by node class; :meth:`rewrite` applies the first that returns a replacement."""

    def __init__(self, rules: Iterable[Rule] = (), once: bool = False) -> None:
        self.rules: list[Rule] = list(rules)
        self.once = once
        """True: each node is rewritten at most once (a map), not to a fixed point."""
        self._by_type: dict[type, list[Callable[[Any], Any]]] = {}

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher([*self.rules, *other.rules], self.once and other.once)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def _for(self, t: type) -> list[Callable[[Any], Any]]:
        fns = self._by_type.get(t)
        if fns is None:
            fns = self._by_type[t] = [
                fn for match, fn in self.rules
                if issubclass(t, match if isinstance(match, tuple) else (match,))
            ]
        return fns

    def rewrite(self, node: Any) -> Any:
        """The first rule's replacement of ``node``, or None when no rule applies."""
        for fn in self._for(type(node)):
            out = fn(node)
            if out is not None and out != node:
                return out
        return None


def map_children(node: N, fn: Callable[[Any], Any]) -> N:
    """``node`` with every child expression, statement and statement tuple passed through
    ``fn`` (one level); the same object when nothing changed."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, ir.Expr | ir.Stmt):
            new = fn(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], ir.Expr | ir.Stmt):
            new = tuple(fn(v) for v in value)
        else:
            continue
        if new is not value and new != value:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]


def rewrite(node: N, pm: PatternMatcher) -> N:
    """``node`` (an expression or statement) rewritten bottom-up to a fixed point."""
    if not pm:
        return node

    def go(n: Any) -> Any:
        n = map_children(n, go)
        while (out := pm.rewrite(n)) is not None:
            if pm.once:
                return out
            n = map_children(out, go)
        return n

    return go(node)


def rewrite_body(body: tuple[ir.Stmt, ...], pm: PatternMatcher) -> tuple[ir.Stmt, ...]:
    return tuple(rewrite(s, pm) for s in body)


def rewrite_function(f: ir.Function, pm: PatternMatcher) -> ir.Function:
    """A polyfill function rewritten; its parameters, locals and body all go through ``pm``."""
    return dataclasses.replace(
        f,
        params=tuple(rewrite(p, pm) for p in f.params),
        locals=tuple(rewrite(v, pm) for v in f.locals),
        body=rewrite_body(f.body, pm),
    )


def rewrite_kernel(k: ir.KernelIR, pm: PatternMatcher) -> ir.KernelIR:
    """A kernel rewritten: locals, body and the polyfill functions it already carries."""
    if not pm:
        return k
    return dataclasses.replace(
        k,
        locals=tuple(rewrite(v, pm) for v in k.locals),
        body=rewrite_body(k.body, pm),
        functions=tuple(rewrite_function(f, pm) for f in k.functions),
    )
