"""What many operators share: shape helpers, attribute checks and generic kernels."""


from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError, UnsupportedOpError
from spawnml.kernel import Helper, Output, Tensor, kernel
from spawnml.kernel.lib import broadcast_offset
from spawnml.op import In, Lowering, Node, Out, TensorInfo, Tmp

# -------------------------------------------------------------------------------- shapes


def broadcast_shapes(node: Node, *shapes: Sequence[int | str | None] | None) -> tuple | None:
    """numpy broadcasting of (possibly symbolic) shapes; None if a rank is unknown."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[int | str | None] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}  # type: ignore[arg-type]
        dims.discard(1)
        if not dims:
            out.append(1)
        elif len(dims) == 1:
            out.append(dims.pop())
        elif all(isinstance(d, int) for d in dims):
            raise InvalidModelError(f"{node.describe()}: shapes {[tuple(s) for s in shapes]} "  # type: ignore[arg-type]
                                    "do not broadcast")
        else:
            ints = [d for d in dims if isinstance(d, int)]
            out.append(ints[0] if ints else None)
    return tuple(out)


def normalize_axis(node: Node, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise InvalidModelError(f"{node.describe()}: axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def same_dtype(node: Node, infos: Sequence[TensorInfo | None]) -> DType:
    dts = {i.dtype for i in infos if i is not None}
    if len(dts) != 1:
        raise InvalidModelError(f"{node.describe()}: inputs must share one dtype, found "
                                f"{sorted(str(d) for d in dts)}")
    return dts.pop()


def static_shape(info: TensorInfo) -> tuple[int, ...]:
    assert info.is_static, info
    return tuple(int(d) for d in info.shape)  # type: ignore[arg-type, union-attr]


# -------------------------------------------------------------------------------- kernels


@kernel
def unary_map(x: Tensor, out: Output, fn: Helper):
    """out = fn(x) elementwise."""
    return fn(x.flat[out.flat])


@kernel
def unary_map_params(x: Tensor, out: Output, fn: Helper, params: tuple):
    """out = fn(x, params) elementwise; ``params`` are the op's float attributes."""
    return fn(x.flat[out.flat], params)


@kernel
def binary_map(a: Tensor, b: Tensor, out: Output, fn: Helper):
    """out = fn(a, b) with numpy broadcasting."""
    return fn(a.flat[broadcast_offset(a, out)], b.flat[broadcast_offset(b, out)])


@kernel
def copy(x: Tensor, out: Output):
    return x.flat[out.flat]


def as_numpy_dtype(info: TensorInfo) -> np.dtype:
    return info.dtype.numpy


# ------------------------------------------------------------------- more shared kernels


@kernel
def binary_map_params(a: Tensor, b: Tensor, out: Output, fn: Helper, params: tuple):
    """out = fn(a, b, params) with numpy broadcasting; ``params`` are compile-time constants."""
    return fn(a.flat[broadcast_offset(a, out)], b.flat[broadcast_offset(b, out)], params)


@kernel
def ternary_map(a: Tensor, b: Tensor, c: Tensor, out: Output, fn: Helper):
    """out = fn(a, b, c) with numpy broadcasting (Where, Clip with tensor bounds)."""
    return fn(
        a.flat[broadcast_offset(a, out)],
        b.flat[broadcast_offset(b, out)],
        c.flat[broadcast_offset(c, out)],
    )


# ------------------------------------------------------------------- dtypes and variadics

KERNEL_DTYPES = frozenset(
    {DType.float32, DType.float16, DType.bfloat16, DType.float64, DType.int8, DType.int16,
     DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32, DType.uint64, DType.bool}
)
"""Storage dtypes kernels can read and write (the narrow ONNX types have no kernel type)."""


def check_dtype(node: Node, dt: DType, allowed: Sequence[DType] | frozenset[DType],
                what: str = "input") -> None:
    """Raise UnsupportedOpError for dtypes kernels cannot compute (float8, int4...) and
    InvalidModelError for dtypes the op does not accept."""
    if dt not in KERNEL_DTYPES:
        raise UnsupportedOpError(f"{node.describe()}: {what} dtype {dt} is not supported "
                                 "(kernels have no such element type)")
    if dt not in allowed:
        raise InvalidModelError(f"{node.describe()}: {what} dtype {dt} is not accepted by "
                                f"{node.op_type} (expected one of "
                                f"{sorted(str(d) for d in allowed)})")


def present_inputs(node: Node, inputs: Sequence[TensorInfo | None], at_least: int = 1
                   ) -> list[TensorInfo]:
    """All inputs, required to be present (variadic ops); at least ``at_least`` of them."""
    if len(inputs) < at_least or any(i is None for i in inputs):
        raise InvalidModelError(f"{node.describe()}: expects at least {at_least} input(s), "
                                "none omitted")
    return list(inputs)  # type: ignore[arg-type]


def fold_binary(low: Lowering, infos: Sequence[TensorInfo], out_dtype: DType, fn: Helper,
                final: Out | Tmp) -> None:
    """Launch ``fn`` pairwise over N >= 2 inputs, left to right, into ``final`` (Sum, Max...).

    Intermediate results live in temporaries shaped by the running broadcast."""
    acc: In | Tmp = In(0)
    shape = static_shape(infos[0])
    for i in range(1, len(infos)):
        shape = tuple(np.broadcast_shapes(shape, static_shape(infos[i])))
        target = final if i == len(infos) - 1 else low.temp(out_dtype, shape)
        low.launch(binary_map, [acc, In(i)], target, fn=fn)
        acc = target  # type: ignore[assignment]
