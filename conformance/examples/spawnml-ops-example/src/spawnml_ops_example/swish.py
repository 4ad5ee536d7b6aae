"""``com.example::Swish(x, alpha=1.0) = x * sigmoid(alpha * x)``, elementwise.

One OpDef: the attribute and dtype checks with the output type (``infer``), the numpy truth
(``reference``), the device computation as one portable kernel (``lower``) and the cases the
conformance suite runs on every backend (``cases``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

DOMAIN = "com.example"


@kernel
def swish_kernel(x: Tensor, out: Output, alpha: float):
    # computed in f32 whatever the storage (f16 inputs keep their accuracy), cast on return
    v = cast(x.flat[out.flat], f32)
    if alpha == 0.0:  # a compile-time condition: only the taken branch is specialised
        return cast(v * 0.5, out.dtype)  # sigmoid(0) = 1/2, also for x = ±inf
    return cast(v / (1.0 + math.exp(-alpha * v)), out.dtype)


class Swish(OpDef):
    domain = DOMAIN
    op_type = "Swish"
    since_version = 1  # the first version of the com.example opset that has it
    dtypes = (DType.float32, DType.float16, DType.float64)
    elementwise_inputs = 1  # the suite generates scalar, size-0 and size-1 shape cases

    def alpha(self, node: Node) -> float:
        alpha = self.attr(node, "alpha", 1.0)
        if isinstance(alpha, bool) or not isinstance(alpha, int | float):
            raise self.fail(node, f"attribute 'alpha' must be a float, got {alpha!r}")
        return float(alpha)

    def infer(self, node: Node, inputs: Sequence[TensorInfo | None],
              values: Sequence[np.ndarray | None]) -> list[TensorInfo]:
        if len(inputs) != 1 or inputs[0] is None:
            raise self.fail(node, f"expects 1 input, got {len(inputs)}")
        x = inputs[0]
        if x.dtype not in self.dtypes:
            raise self.fail(node, f"input dtype {x.dtype} is not a float type")
        self.alpha(node)
        return [TensorInfo(x.dtype, x.shape)]

    def reference(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        f = x.astype(np.float64)
        alpha = self.alpha(node)
        with np.errstate(all="ignore"):
            # alpha = 0 is x / 2 everywhere (0 * inf would make ±inf inputs NaN, and GPU
            # targets may fold 0 * x to 0: the op defines it instead of leaving it open)
            y = f * 0.5 if alpha == 0.0 else f / (1.0 + np.exp(-alpha * f))
        return [y.astype(x.dtype)]

    def lower(self, node: Node, inputs: Sequence[TensorInfo | None],
              outputs: Sequence[TensorInfo], values: Sequence[np.ndarray | None]) -> Lowering:
        low = Lowering()
        low.launch(swish_kernel, [In(0)], Out(0), alpha=self.alpha(node))
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(0)
        x = rng.uniform(-8.0, 8.0, (3, 4)).astype(np.float32)
        return [
            OpCase("default_alpha", [x]),
            *(OpCase(f"alpha_{a:g}", [x], {"alpha": a}) for a in (0.5, 2.0, 0.0, -1.0)),
            OpCase("f16", [x.astype(np.float16)], {"alpha": 1.5}, rtol=1e-3, atol=1e-3),
            OpCase("f64", [rng.uniform(-30.0, 30.0, (7,))], {"alpha": 1.0}),
            OpCase("wide_range", [np.linspace(-100, 100, 41, dtype=np.float32)]),
        ]
