"""Seeded random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli.

Numbers come from a counter-based hash (``lowbias32``) of (seed, element index), so every
backend and the numpy reference produce the *same* stream for a seed, in any launch order.
This is not the generator onnxruntime or onnx.reference use: a model's seeded outputs
match spawnml's own reference exactly, but never the official test files' values (those
cases can only check shapes and ranges). Without a ``seed`` attribute, a fresh seed is
drawn per node (ONNX leaves unseeded streams unspecified)."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

import math

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, f32, helper, kernel, u32
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

_M1, _M2 = 0x7FEB352D, 0x846CA68B
_FLOAT_OUT = (DType.float32, DType.float16, DType.float64)


@helper
def hash32(x):
    """lowbias32: a well-mixed 32-bit integer hash (wrapping u32 arithmetic)."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@helper
def uniform01(i, key, stream):
    """A float in [0, 1) with 24 random bits, for element ``i`` of ``stream``."""
    h = hash32(hash32(cast(i, u32) ^ cast(key, u32)) + cast(stream, u32))
    return cast(h >> 8, f32) * (1.0 / 16777216.0)


@kernel
def random_uniform(out: Output, key: int, low: float, high: float):
    return cast(low + (high - low) * uniform01(out.flat, key, 0), out.dtype)


@kernel
def random_normal(out: Output, key: int, mean: float, scale: float):
    # Box-Muller over two independent streams; 1 - u1 is in (0, 1], so log is finite.
    u1 = uniform01(out.flat, key, 0)
    u2 = uniform01(out.flat, key, 1)
    z = sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2)
    return cast(mean + scale * z, out.dtype)


@kernel
def bernoulli(p: Tensor, out: Output, key: int):
    hit = uniform01(out.flat, key, 0) < cast(p.flat[out.flat], f32)
    return cast(1 if hit else 0, out.dtype)


# -------------------------------------------------------------------- numpy reference


def _hash32(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint32)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint32(16)
        x *= np.uint32(_M1)
        x ^= x >> np.uint32(15)
        x *= np.uint32(_M2)
        x ^= x >> np.uint32(16)
    return x


def uniform01_np(n: int, key: int, stream: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        h = _hash32(_hash32(i ^ np.uint32(key)) + np.uint32(stream))
    return (h >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def seed_key(node: Node, op: OpDef) -> int:
    """The 31-bit stream key of a node's ``seed`` (a fresh one when the seed is absent)."""
    if "seed" not in node.attrs:
        return int(np.random.default_rng().integers(0, 2**31))
    seed = float(node.attrs["seed"])
    if not math.isfinite(seed):
        raise op.fail(node, f"seed must be finite, got {seed}")
    return int(_hash32(np.array([int(seed) & 0xFFFFFFFF], np.uint64))[0]) & 0x7FFFFFFF


class RandomOp(OpDef):
    """Shared attribute handling: output dtype and shape (from ``shape`` or input 0)."""

    since_version = 1
    random = True  # draws: conformance compares shapes and dtypes, not values
    like = False
    default_dtype: DType | None = DType.float32

    def out_dtype(self, node: Node, x: TensorInfo | None) -> DType:
        if "dtype" in node.attrs:
            dt = as_dtype(int(node.attrs["dtype"]))
        elif x is not None and self.like:
            dt = x.dtype
        else:
            dt = self.default_dtype  # type: ignore[assignment]
        if dt not in self.allowed:
            raise UnsupportedOpError(f"{node.describe()}: output dtype {dt} is not supported")
        return dt

    allowed: tuple[DType, ...] = _FLOAT_OUT

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if self.like:
            if x is None:
                raise self.fail(node, "input 0 is required")
            return [TensorInfo(self.out_dtype(node, x), x.shape)]
        shape = self.attr(node, "shape", required=True)
        if any(int(d) < 0 for d in shape):
            raise self.fail(node, f"shape {tuple(shape)} has negative dimensions")
        return [TensorInfo(self.out_dtype(node, None), tuple(int(d) for d in shape))]

    def shape_and_dtype(self, node: Node, inputs) -> tuple[tuple[int, ...], np.dtype]:
        x = np.asarray(inputs[0]) if inputs and inputs[0] is not None else None
        info = None if x is None else TensorInfo(as_dtype(x.dtype), x.shape)
        out = self.infer(node, [info], [None])[0]
        return tuple(out.shape), out.dtype.numpy  # type: ignore[arg-type]


class RandomUniform(RandomOp):
    op_type = "RandomUniform"

    def bounds(self, node: Node) -> tuple[float, float]:
        low, high = float(self.attr(node, "low", 0.0)), float(self.attr(node, "high", 1.0))
        if not low <= high:
            raise self.fail(node, f"low ({low}) must not exceed high ({high})")
        return low, high

    def reference(self, node, inputs) -> list[np.ndarray]:
        shape, dt = self.shape_and_dtype(node, inputs)
        low, high = self.bounds(node)
        u = uniform01_np(int(np.prod(shape)), seed_key(node, self), 0)
        return [(np.float32(low) + np.float32(high - low) * u).reshape(shape).astype(dt)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low_, high = self.bounds(node)
        low = Lowering()
        low.launch(random_uniform, [], Out(0), key=seed_key(node, self), low=low_, high=high)
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("default", [], {"shape": (3, 4), "seed": 1.0}),
            OpCase("bounds", [], {"shape": (5,), "seed": 7.0, "low": -2.0, "high": 3.0}),
            OpCase("float16", [], {"shape": (2, 1), "seed": 0.0, "dtype": 10}, atol=1e-3),
            OpCase("size1", [], {"shape": (1, 1, 1), "seed": 3.0}),
        ]


class RandomNormal(RandomOp):
    op_type = "RandomNormal"

    def reference(self, node, inputs) -> list[np.ndarray]:
        shape, dt = self.shape_and_dtype(node, inputs)
        n, key = int(np.prod(shape)), seed_key(node, self)
        u1, u2 = uniform01_np(n, key, 0), uniform01_np(n, key, 1)
        z = np.sqrt(-2.0 * np.log(1.0 - u1.astype(np.float64))) * np.cos(2 * np.pi * u2)
        mean, scale = float(self.attr(node, "mean", 0.0)), float(self.attr(node, "scale", 1.0))
        return [(mean + scale * z).reshape(shape).astype(dt)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(random_normal, [], Out(0), key=seed_key(node, self),
                   mean=float(self.attr(node, "mean", 0.0)),
                   scale=float(self.attr(node, "scale", 1.0)))
        return low

    def cases(self) -> list[OpCase]:
        return [
            OpCase("default", [], {"shape": (4, 5), "seed": 2.0}, rtol=1e-4, atol=1e-4),
            OpCase("mean_scale", [], {"shape": (6,), "seed": 5.0, "mean": 3.0, "scale": 0.5},
                   rtol=1e-4, atol=1e-4),
        ]


class RandomUniformLike(RandomUniform):
    op_type = "RandomUniformLike"
    like = True

    def cases(self) -> list[OpCase]:
        x = np.zeros((2, 3), np.float32)
        return [OpCase("like", [x], {"seed": 4.0}),
                OpCase("like_dtype", [np.zeros((3,), np.int32)], {"seed": 4.0, "dtype": 1})]


class RandomNormalLike(RandomNormal):
    op_type = "RandomNormalLike"
    like = True

    def cases(self) -> list[OpCase]:
        return [OpCase("like", [np.zeros((3, 2), np.float32)], {"seed": 9.0},
                       rtol=1e-4, atol=1e-4)]


class Bernoulli(RandomOp):
    """1 where a uniform draw is below the probability in input 0, else 0."""

    op_type = "Bernoulli"
    since_version = 15
    like = True
    allowed = (*_FLOAT_OUT, DType.bool, DType.int8, DType.int16, DType.int32, DType.int64,
               DType.uint8, DType.uint16, DType.uint32)

    def reference(self, node, inputs) -> list[np.ndarray]:
        p = np.asarray(inputs[0])
        shape, dt = self.shape_and_dtype(node, inputs)
        u = uniform01_np(p.size, seed_key(node, self), 0).reshape(shape)
        return [(u < p.astype(np.float32)).astype(dt)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        low = Lowering()
        low.launch(bernoulli, [In(0)], Out(0), key=seed_key(node, self))
        return low

    def cases(self) -> list[OpCase]:
        p = np.array([[0.0, 0.3, 0.5], [0.9, 1.0, 0.7]], np.float32)
        return [OpCase("float", [p], {"seed": 0.0}),
                OpCase("bool_out", [p], {"seed": 1.0, "dtype": 9}),
                OpCase("double_in", [p.astype(np.float64)], {"seed": 2.0})]


RANDOM_OPS: list[type[OpDef]] = [RandomUniform, RandomNormal, RandomUniformLike,
                                 RandomNormalLike, Bernoulli]
