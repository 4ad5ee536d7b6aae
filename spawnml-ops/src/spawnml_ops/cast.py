"""Cast and CastLike between every kernel dtype (floats, integers, bool).

float64 is computed as f32 (kernels have no double); float -> integer truncates toward zero
and out-of-range values are unspecified, as in C. Casts from or to the narrow types
(bfloat16, float8, float4, int4, int2) and to or from string run on the host
(``exotic_cast``, ``string_cast``); complex and float6 raise UnsupportedOpError naming the
dtype.
"""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype, from_onnx
from spawnml.errors import InvalidInputError, UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, kernel
from spawnml.op import HostOnly, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import KERNEL_DTYPES, check_dtype
from .exotic_cast import cast_array, is_narrow, require_host, since_opset
from .string_cast import from_strings, to_strings
from .unary_base import sample

# TensorProto codes of element types Cast does not support, named for error messages.
_UNSUPPORTED_CODES = {
    0: "undefined", 14: "complex64", 15: "complex128",
    27: "float6e2m3", 28: "float6e3m2",
}
_ROUND_MODES = ("up", "down", "nearest")
CAST_DTYPES = sorted(KERNEL_DTYPES, key=lambda d: d.value)


@kernel
def cast_map(x: Tensor, out: Output):
    """out = x converted to the output's type (narrow integers wrap on store)."""
    return cast(x.flat[out.flat], out.dtype)


class CastBase(OpDef):
    """What Cast and CastLike share: attribute checks, reference and kernel."""

    def edge_unspecified(self, node: Node, outputs: Sequence[TensorInfo]) -> tuple[int, ...]:
        """ONNX leaves float -> integer conversions of NaN, ±Inf and out-of-range values
        undefined (numpy gives the CPU's "integer indefinite", compiled code may saturate)."""
        return (0,) if outputs and outputs[0].dtype.is_int else ()

    def check_attrs(self, node: Node) -> None:
        sat = self.attr(node, "saturate", 1)
        if sat not in (0, 1):
            raise self.fail(node, f"attribute 'saturate' must be 0 or 1, got {sat!r}")
        mode = self.attr(node, "round_mode", "up")
        if mode not in _ROUND_MODES:
            raise self.fail(node, f"attribute 'round_mode' must be one of {_ROUND_MODES}, "
                                  f"got {mode!r}")

    def target(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        raise NotImplementedError

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None], values) -> list[TensorInfo]:
        if not inputs or inputs[0] is None:
            raise self.fail(node, "input 0 is required")
        self.check_attrs(node)
        x = inputs[0]
        self.check_type(node, x.dtype, "input")
        to = self.target(node, inputs)
        self.check_type(node, to, "target")
        return [TensorInfo(to, x.shape)]

    def check_type(self, node: Node, dt: DType, what: str) -> None:
        """Kernel types, strings (opset 9+, host) and the narrow types (host) from the
        opset that added them."""
        if dt.is_string:
            if node.opset < 9:
                raise self.fail(node, f"{what} dtype string needs opset 9")
        elif not is_narrow(dt):
            check_dtype(node, dt, KERNEL_DTYPES, what)
        elif node.opset < since_opset(dt):
            raise self.fail(node, f"{what} dtype {dt} needs opset {since_opset(dt)}")

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        to = self.target(node, [TensorInfo(as_dtype(x.dtype), x.shape)]
                         + [None if a is None else TensorInfo(as_dtype(np.asarray(a).dtype), ())
                            for a in inputs[1:]])
        if to.is_string:
            return [to_strings(x)]
        if x.dtype.kind in "OUS":
            return [from_strings(node, x, to)]
        if is_narrow(to, DType(x.dtype.name)):
            return [cast_array(x, to, bool(self.attr(node, "saturate", 1)),
                               str(self.attr(node, "round_mode", "up")))]
        with np.errstate(all="ignore"):
            return [x.astype(to.numpy)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        require_host(node, inputs[0].dtype, outputs[0].dtype)
        if inputs[0].dtype.is_string or outputs[0].dtype.is_string:
            raise HostOnly(f"{node.describe()}: casts to or from string run on the host")
        low = Lowering()
        low.launch(cast_map, [In(0)], Out(0))
        return low


def cast_inputs(src: DType, dst: DType, seed: int) -> np.ndarray:
    """Values of ``src`` whose conversion to ``dst`` is defined (no overflow, no NaN to int)."""
    lo = 0 if (src.is_unsigned_int or dst.is_unsigned_int) else -100
    if src is DType.bool:
        return sample((2, 5), bool, seed=seed)
    if src.is_float:
        x = sample((2, 5), src.numpy, lo, 100, seed, specials=dst.is_float or dst is DType.bool)
        x.reshape(-1)[-1] = 0.0 if dst is not DType.float16 else 65504.0  # f16 max survives
        return x
    return sample((2, 5), src.numpy, lo, 100, seed)


class Cast(CastBase):
    op_type = "Cast"
    since_version = 6

    def target(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        code = self.attr(node, "to", required=True)
        if code in _UNSUPPORTED_CODES:
            raise UnsupportedOpError(f"{node.describe()}: Cast to {_UNSUPPORTED_CODES[code]} "
                                     "is not supported (no kernel element type)")
        try:
            return from_onnx(int(code))
        except (InvalidInputError, TypeError, ValueError):
            raise self.fail(node, f"attribute 'to' is not an element type code: {code!r}") from None

    def cases(self) -> list[OpCase]:
        cases = []
        for i, src in enumerate(CAST_DTYPES):
            for j, dst in enumerate(CAST_DTYPES):
                x = cast_inputs(src, dst, 10 * i + j)
                cases.append(OpCase(f"{src}_to_{dst}", [x], {"to": dst.onnx}))
        f = np.float32
        cases += [
            OpCase("scalar", [np.array(3.7, f)], {"to": DType.int32.onnx}),
            OpCase("empty", [np.zeros((0, 3), f)], {"to": DType.float16.onnx}),
            OpCase("neg_zero_to_f16", [np.array([-0.0, 0.0], f)], {"to": DType.float16.onnx}),
            OpCase("truncate", [np.array([-2.7, -0.5, 0.5, 2.7], f)], {"to": DType.int8.onnx}),
            OpCase("narrow_wrap", [np.array([255, 256, -1, 1000], np.int32)],
                   {"to": DType.uint8.onnx}),
            OpCase("saturate_attr", [np.array([1.5], f)], {"to": DType.float16.onnx,
                                                            "saturate": 0}, opset=19),
            OpCase("float_to_string", [np.array([1.0, 0.1, 1e20, -2.5e-8, np.nan, np.inf,
                                                 -np.inf, 1 / 3], f)], {"to": 8}),
            OpCase("int_to_string", [np.array([[1, -5], [0, 7]], np.int64)], {"to": 8}),
            OpCase("string_to_float", [np.array(["1.5", "-3", "nan", "INF", " 2"], object)],
                   {"to": DType.float32.onnx}),
            OpCase("string_to_int", [np.array(["15", "-3"], object)], {"to": DType.int64.onnx}),
        ]
        return cases


class CastLike(CastBase):
    op_type = "CastLike"
    since_version = 15

    def target(self, node: Node, inputs: Sequence[TensorInfo | None]) -> DType:
        if len(inputs) != 2 or inputs[1] is None:
            raise self.fail(node, "expects inputs input and target_type")
        return inputs[1].dtype

    def cases(self) -> list[OpCase]:
        pairs: list[tuple[DType, DType]] = [
            (DType.float32, DType.float16), (DType.float16, DType.float32),
            (DType.float64, DType.float32), (DType.float32, DType.int64),
            (DType.int64, DType.float32), (DType.bool, DType.float32),
            (DType.float32, DType.bool), (DType.uint8, DType.int8), (DType.int32, DType.uint16),
        ]
        cases: list[OpCase] = []
        for i, (src, dst) in enumerate(pairs):
            like: Any = np.zeros((1,), dst.numpy)
            cases.append(OpCase(f"{src}_like_{dst}", [cast_inputs(src, dst, i), like]))
        cases.append(OpCase("empty", [np.zeros((0,), np.float32), np.zeros((), np.int32)]))
        return cases


OPS: list[type[OpDef]] = [Cast, CastLike]
