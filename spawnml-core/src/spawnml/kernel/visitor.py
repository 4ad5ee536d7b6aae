"""The one visitor every IR walker uses: C-style printers, WAT, SIMD, numpy, interpreters.

A subclass defines ``visit_<Node>`` methods (``visit_Const``, ``visit_Binary``,
``visit_Assign``, ...) for the node classes it handles; :meth:`Visitor.visit` dispatches on
the node's class through a table built once per subclass, so a walker is a set of small
methods, not a chain of ``isinstance`` tests.
"""

from __future__ import annotations

from typing import Any, ClassVar

from . import ir

NODE_TYPES: tuple[type, ...] = (
    ir.Const, ir.Var, ir.GlobalIndex, ir.Load, ir.Unary, ir.Binary, ir.Select, ir.Cast,
    ir.Bitcast, ir.Call, ir.Assign, ir.If, ir.For, ir.Return, ir.Store,
    ir.VecRef, ir.VecSplat, ir.VecLanes, ir.VecLoad, ir.VecBinary, ir.VecCall, ir.VecAssign,
    ir.VecStore,
)


class Visitor:
    """Dispatches ``visit(node, *args)`` to ``visit_<class name>(node, *args)``."""

    _dispatch: ClassVar[dict[type, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {
            t: getattr(cls, f"visit_{t.__name__}")
            for t in NODE_TYPES
            if hasattr(cls, f"visit_{t.__name__}")
        }

    def visit(self, node: Any, *args: Any) -> Any:
        method = self._dispatch.get(type(node))
        if method is None:
            for base in type(node).__mro__[1:]:  # a subclass of an IR node (plugins)
                method = self._dispatch.get(base)
                if method is not None:
                    break
            else:
                raise NotImplementedError(f"{type(self).__name__}: {type(node).__name__}")
        return method(self, node, *args)
