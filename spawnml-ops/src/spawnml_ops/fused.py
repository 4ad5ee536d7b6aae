"""Fused activations inside a kernel: the helper and constants a Conv, Gemm, MatMul or Add
kernel applies to its result when graph.fusion folded an activation node into it.

A kernel that fuses takes three arguments, ``act: Helper, act_params: tuple, act_arity: int``,
filled in by :func:`activation_args`, and ends with
``apply_activation(acc, act, act_params, act_arity)``.
"""

from __future__ import annotations

from typing import Any

from spawnml.errors import UnsupportedOpError
from spawnml.graph.fusion import fused_activation
from spawnml.kernel import Helper, Output, Tensor, helper, kernel
from spawnml.kernel.lib import broadcast_offset
from spawnml.op import Node

from .activations import Clip, clip_attrs
from .unary_base import UnaryOp

# Activations whose kernel form is a helper with compile-time float params.
IN_KERNEL = frozenset({
    "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Selu",
    "Softplus",
})  # fmt: skip


@helper
def no_activation(v):
    return v


@helper
def apply_activation(v, act, act_params, act_arity):
    """act(v), with its compile-time params when it takes some (resolved at specialisation)."""
    if act_arity == 2:
        return act(v, act_params)
    else:
        return act(v)


NO_ACTIVATION: dict[str, Any] = {"act": no_activation, "act_params": (), "act_arity": 1}


def activation_args(node: Node) -> dict[str, Any]:
    """Kernel arguments (act, act_params, act_arity) applying ``node``'s fused activation."""
    found = fused_activation(node)
    if found is None:
        return NO_ACTIVATION
    op, act, constants = found
    if isinstance(op, Clip):
        return {"act": clip_attrs, "act_params": op.bounds(act, constants), "act_arity": 2}
    if isinstance(op, UnaryOp) and act.op_type in IN_KERNEL:
        params = op.params(act)
        return {"act": type(op).fn, "act_params": params, "act_arity": 2 if params else 1}
    raise UnsupportedOpError(
        f"{node.op_type} node {node.name!r}: fused activation {act.op_type} has no in-kernel "
        f"form; expected one of {sorted(IN_KERNEL)}"
    )


@kernel
def binary_map_act(
    a: Tensor, b: Tensor, out: Output, fn: Helper, act: Helper, act_params: tuple,
    act_arity: int,
):
    """out = act(fn(a, b)) with numpy broadcasting: an elementwise op with a fused activation."""
    v = fn(a.flat[broadcast_offset(a, out)], b.flat[broadcast_offset(b, out)])
    return apply_activation(v, act, act_params, act_arity)
