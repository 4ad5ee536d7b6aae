"""Runs specialised kernels on the CPU: generated numpy code over chunks of the output grid."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import dump, ir
from spawnml.kernel.render import Renderer
from spawnml.kernel.traits import TargetTraits, table
from spawnml.kernel.types import ScalarType

from . import runtime_support
from .numpy_codegen import NATIVE, Generated, NumpyCodegen

_LANE_BUDGET = 1 << 21  # elements per temporary array (lanes x vectorised loop iterations)
_MAX_LANES = 1 << 22


class NumpyProgram:
    """A compiled kernel: the generated function plus the chunking plan. ``storage_dtype``
    is how the backend stores each dtype (bfloat16 as uint16 bits): buffers are viewed so."""

    def __init__(self, kernel: ir.KernelIR, source: str, fn: object, max_trip: int,
                 storage_dtype: Callable[[DType], DType] = lambda dt: dt) -> None:
        self.kernel = kernel
        self.storage_dtype = storage_dtype
        self.source = source
        self.fn = fn
        shape = kernel.output.shape
        lanes = max(1, min(_MAX_LANES, _LANE_BUDGET // max(1, max_trip)))
        # Split along the first axis whose trailing block fits the lane budget.
        self.axis, self.rows = 0, 1
        for axis in range(len(shape)):
            block = math.prod(shape[axis + 1 :])
            if block <= lanes:
                self.axis, self.rows = axis, max(1, lanes // max(1, block))
                break

    def run(self, out_buffer: np.ndarray, in_buffers: Sequence[np.ndarray]) -> None:
        k = self.kernel
        if k.output.size == 0:
            return
        out, ins = self.views(out_buffer, in_buffers)
        shape = k.output.shape
        with np.errstate(all="ignore"):
            if not shape:
                out[0] = self.fn(out, ins, (), (), ())
                return
            for lead in itertools.product(*(range(d) for d in shape[: self.axis])):
                for r0 in range(0, shape[self.axis], self.rows):
                    r1 = min(shape[self.axis], r0 + self.rows)
                    self._chunk(out, ins, lead, r0, r1)

    def view(self, buffer: np.ndarray, spec: ir.BufferSpec) -> np.ndarray:
        """The elements of ``spec`` in a byte buffer, typed as the backend stores them."""
        dt = self.storage_dtype(spec.dtype).numpy
        return buffer[: spec.size * dt.itemsize].view(dt)

    def views(self, out_buffer: np.ndarray, in_buffers: Sequence[np.ndarray]
              ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The output's and the inputs' typed views of their byte buffers."""
        k = self.kernel
        ins = [self.view(b, s) for b, s in zip(in_buffers, k.inputs)]
        return self.view(out_buffer, k.output), ins

    def _chunk(
        self, out: np.ndarray, ins: list[np.ndarray], lead: tuple[int, ...], r0: int, r1: int
    ) -> None:
        grid, ranges, counts, target = chunk(out, self.kernel.output.shape, self.axis, lead, r0, r1)
        target[...] = self.fn(out, ins, grid, ranges, counts)


class NumpyRenderer(Renderer):
    """KernelIR -> the numpy source of one kernel (``render``), then the program (``program``).

    numpy computes every type natively, so the core passes only expand the polyfills of the
    intrinsics it lacks (those not in ``NATIVE``)."""

    name = "numpy"

    def __init__(self, storage_dtype: Callable[[DType], DType] = lambda dt: dt) -> None:
        super().__init__(storage_dtype)
        self.generated: Generated | None = None

    @property  # type: ignore[override]
    def traits(self) -> TargetTraits:
        return TargetTraits("cpu", intrinsics=table(dict.fromkeys(NATIVE, "numpy")))

    def print_kernel(self, k: ir.KernelIR) -> str:
        self.generated = NumpyCodegen(k, list(k.functions)).render()
        header = f"# kernel {k.name} ({k.source}) specialised as {k.key}\n"
        return header + self.generated.source

    def program(self, kernel: ir.KernelIR, source: str) -> NumpyProgram:
        """The rendered ``source`` executed into a program (with the constants it names)."""
        gen = self.generated
        assert gen is not None, "render the kernel first"
        namespace: dict[str, object] = {"_np": np, "_rt": runtime_support}
        for t in ScalarType:
            namespace[f"_dt_{t.value}"] = t.numpy
        for name, (t, value) in ((name, key) for name, key in gen.constants.items()):
            namespace[name] = (
                t.numpy.type(eval(value))
                if value not in ("nan", "inf", "-inf")
                else t.numpy.type(float(value))
            )
        exec(compile(source, f"<spawnml kernel {kernel.key}>", "exec"), namespace)
        return NumpyProgram(kernel, source, namespace["kernel"], gen.max_trip,
                            self.storage_dtype)


def compile_numpy(kernel: ir.KernelIR) -> NumpyProgram:
    """Generate, dump (``SPAWNML_DUMP_KERNELS``) and compile a kernel's numpy code."""
    renderer = NumpyRenderer()
    source = renderer.render(kernel)
    dump.write("cpu", kernel, source, "py")
    return renderer.program(kernel, source)


def chunk(
    out: np.ndarray, shape: Sequence[int], axis: int, lead: tuple[int, ...], r0: int, r1: int
) -> tuple[tuple[np.ndarray, ...], tuple, tuple[int, ...], np.ndarray]:
    """One chunk of an output grid: rows ``r0:r1`` along ``axis`` at the leading position
    ``lead``, as (index grids, (start, count, step) ranges, counts, the flat output's slice
    viewed in the chunk's shape)."""
    grid, ranges, counts = [], [], []
    for d in range(len(shape)):
        sh = [1] * len(shape)
        if d < axis:
            start, count = lead[d], 1
        elif d == axis:
            start, count = r0, r1 - r0
        else:
            start, count = 0, shape[d]
        sh[d] = count
        grid.append(np.arange(start, start + count, dtype=np.int32).reshape(sh))
        ranges.append((start, count, 1))
        counts.append(count)
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    flat0 = sum(r[0] * s for r, s in zip(ranges, strides))
    target = out[flat0 : flat0 + math.prod(counts)].reshape(counts)
    return tuple(grid), tuple(ranges), tuple(counts), target
