"""Layout ops: Pad, DepthToSpace, SpaceToDepth, Trilu and ReverseSequence."""


from __future__ import annotations

import numpy as np

from spawnml.kernel import Output, Tensor, cast, i32, kernel, static_range
from spawnml.op import Data, In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .axes import has_input, input_ints, kernel_dtype, norm_axes, rank_of, require_values, static
from .common import normalize_axis
from .views import launch_view, row_major_strides

PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


@kernel
def pad(x: Tensor, value: Tensor, out: Output, begin: tuple, mode: int):
    off = 0
    for d in static_range(out.ndim):
        n = x.shape[d]
        i = out.index[d] - begin[d]
        if mode == 0:
            if i < 0 or i >= n:
                return value.flat[0]
        elif mode == 1:
            if n > 1:  # reflect without repeating the edge, period 2(n-1)
                i = i % (2 * n - 2)
                i = 2 * n - 2 - i if i >= n else i
            else:
                i = 0
        elif mode == 2:
            i = min(max(i, 0), n - 1)
        else:
            i = i % n
        off = off + i * x.strides[d]
    return x.flat[off]


class Pad(OpDef):
    op_type = "Pad"
    value_inputs = (1, 3)

    def _pads(self, node: Node, rank: int, values) -> list[int] | None:
        """Begin pads then end pads for every axis; None when the pads input is unknown."""
        if node.opset < 11:
            raw = list(self.attr(node, "pads", None) or self.attr(node, "paddings", required=True))
            axes = list(range(rank))
        else:
            raw = input_ints(self, node, values, 1)
            if raw is None:
                return None
            if has_input(node, 3):
                found = input_ints(self, node, values, 3)
                if found is None:
                    return None
                axes = norm_axes(node, found, rank)
            else:
                axes = list(range(rank))
        if len(raw) != 2 * len(axes):
            raise self.fail(node, f"pads has {len(raw)} values, expected {2 * len(axes)}")
        pads = [0] * (2 * rank)
        for j, a in enumerate(axes):
            pads[a], pads[a + rank] = raw[j], raw[j + len(axes)]
        return pads

    def _mode(self, node: Node) -> str:
        mode = self.attr(node, "mode", "constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in PAD_MODES or (mode == "wrap" and node.opset < 19):
            raise self.fail(node, f"unsupported mode {mode!r}")
        return mode

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        assert x is not None and x.shape is not None
        mode = self._mode(node)
        value = inputs[2] if node.opset >= 11 and has_input(node, 2) else None
        if value is not None and value.is_static and value.size > 1:
            raise self.fail(node, f"constant_value must be a scalar, got shape {value.shape}")
        pads = self._pads(node, rank, values)
        if pads is None:
            return [TensorInfo(x.dtype, tuple([None] * rank))]
        shape = []
        for d, s in enumerate(x.shape):
            if not isinstance(s, int):
                shape.append(None)
                continue
            begin, end = pads[d], pads[d + rank]
            n = s + begin + end
            if n < 0:
                raise self.fail(node, f"pads {pads} are invalid for shape {x.shape}")
            # edge and reflect pad what is left after the negative pads crop (onnxruntime):
            # at least 1 (edge) or 2 (reflect) elements, and reflect pads within it
            kept = s - max(0, -begin) - max(0, -end)
            if mode in ("edge", "reflect", "wrap") and max(begin, end) > 0:
                least = 2 if mode == "reflect" else 1
                if kept < least or (mode == "reflect" and max(begin, end) > kept - 1):
                    raise self.fail(node, f"{mode} pads {pads} need at least {least} element(s) "
                                          f"of axis {d} after cropping, and reflect pads at "
                                          f"most that many - 1 (shape {x.shape})")
            shape.append(n)
        return [TensorInfo(x.dtype, tuple(shape))]

    def _value(self, node: Node, dtype: np.dtype, inputs) -> np.ndarray:
        if node.opset < 11:
            return np.array([self.attr(node, "value", 0.0)], dtype)
        if has_input(node, 2) and inputs[2] is not None:
            return np.asarray(inputs[2], dtype).reshape(-1)[:1]
        return np.zeros(1, dtype)

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        rank = x.ndim
        pads = self._pads(node, rank, inputs)
        assert pads is not None
        mode = self._mode(node)
        widths = [(max(pads[d], 0), max(pads[d + rank], 0)) for d in range(rank)]
        if mode == "constant":  # pad, then crop the negative pads (an overlap crops fill)
            v = self._value(node, x.dtype, inputs)[0]
            padded = np.pad(x, widths, mode="constant", constant_values=v)
            return [padded[tuple(slice(max(-pads[d], 0), padded.shape[d] - max(-pads[d + rank], 0))
                                 for d in range(rank))]]
        # edge/reflect/wrap: crop first, then pad what is left (infer checked it is enough)
        crop = tuple(slice(max(-pads[d], 0), x.shape[d] - max(-pads[d + rank], 0))
                     for d in range(rank))
        return [np.pad(x[crop], widths, mode=mode)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        shape = static(inputs[0])
        pads = self._pads(node, len(shape), values)
        require_values(node, "the pads/axes input", pads)
        assert pads is not None
        low = Lowering()
        if not outputs[0].size:
            return low
        has_value = node.opset >= 11 and has_input(node, 2)
        value = In(2) if has_value else Data(self._value(node, inputs[0].dtype.numpy, [None] * 3))
        low.launch(pad, [In(0), value], Out(0), begin=tuple(pads[:len(shape)]),
                   mode=PAD_MODES[self._mode(node)])
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        pads = np.array([1, 2, 2, 5], np.int64)
        within = np.array([1, 2, 2, 3], np.int64)  # reflect pads stay below the axis size
        cases = [OpCase(f"{m}", [x, within if m == "reflect" else pads], {"mode": m}, opset=19)
                 for m in PAD_MODES]
        return [
            *cases,
            OpCase("constant_value", [x, pads, np.array(-7.0, np.float32)], opset=19),
            OpCase("negative_crop", [x, np.array([-1, 1, 0, -2], np.int64)], opset=19),
            OpCase(
                "axes_input",
                [x, np.array([2, 3], np.int64), None, np.array([-1], np.int64)],
                {"mode": "reflect"},
                opset=19,
            ),
            OpCase("attr_form", [x], {"pads": [0, 1, 1, 0], "value": 2.5}, opset=2),
            OpCase("edge_int64", [x.astype(np.int64), pads], {"mode": "edge"}, opset=19),
            # reflect over a size-1 axis is refused, as onnxruntime refuses it (it needs two
            # elements): graph/test_fuzz_regressions.py checks every such case against it
            OpCase("size1_edge", [x[:1], np.array([1, 0, 1, 0], np.int64)], {"mode": "edge"},
                   opset=19),
        ]


class _SpaceDepth(OpDef):
    to_space: bool

    def _block(self, node: Node) -> int:
        b = int(self.attr(node, "blocksize", required=True))
        if b < 1:
            raise self.fail(node, f"blocksize must be positive, got {b}")
        return b

    def _dcr(self, node: Node) -> bool:
        mode = self.attr(node, "mode", "DCR")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("DCR", "CRD"):
            raise self.fail(node, f"mode must be DCR or CRD, got {mode!r}")
        return mode == "DCR"

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if rank_of(self, node, x) != 4:
            raise self.fail(node, "input must be 4-D (N, C, H, W)")
        assert x is not None and x.shape is not None
        b = self._block(node)
        self._dcr(node)
        n, c, h, w = x.shape
        if self.to_space:
            if isinstance(c, int) and c % (b * b):
                raise self.fail(node, f"channels {c} are not divisible by blocksize² {b * b}")
            shape = (n, c // (b * b) if isinstance(c, int) else None,
                     h * b if isinstance(h, int) else None, w * b if isinstance(w, int) else None)
        else:
            if (isinstance(h, int) and h % b) or (isinstance(w, int) and w % b):
                raise self.fail(node, f"spatial dims {h}x{w} are not divisible by {b}")
            shape = (n, c * b * b if isinstance(c, int) else None,
                     h // b if isinstance(h, int) else None, w // b if isinstance(w, int) else None)
        return [TensorInfo(x.dtype, shape)]

    def view(self, node: Node, shape) -> tuple[list[int], list[int]]:
        """The input as a 6-D tensor and the permutation making the output order."""
        n, c, h, w = shape
        b = self._block(node)
        if self.to_space:
            if self._dcr(node):
                return [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
            return [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]
        if self._dcr(node):
            return [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4]
        return [n, c, h // b, b, w // b, b], [0, 1, 3, 5, 2, 4]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        six, perm = self.view(node, x.shape)
        out = self.infer(node, [TensorInfo(_dt(x), x.shape)], [])[0].shape
        return [np.transpose(x.reshape(six), perm).reshape(out).copy()]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        six, perm = self.view(node, static(inputs[0]))
        strides = row_major_strides(six)
        low = Lowering()
        launch_view(low, In(0), Out(0), 0, [six[p] for p in perm], [strides[p] for p in perm])
        return low


def _dt(x: np.ndarray):
    from spawnml.dtypes import dtype

    return dtype(x.dtype)


class DepthToSpace(_SpaceDepth):
    op_type = "DepthToSpace"
    to_space = True

    def cases(self) -> list[OpCase]:
        x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
        return [OpCase("dcr", [x], {"blocksize": 2}),
                OpCase("crd", [x], {"blocksize": 2, "mode": "CRD"}, opset=13),
                OpCase("block1", [x], {"blocksize": 1})]


class SpaceToDepth(_SpaceDepth):
    op_type = "SpaceToDepth"
    to_space = False

    def cases(self) -> list[OpCase]:
        x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
        return [OpCase("block2", [x], {"blocksize": 2}),
                OpCase("crd", [x], {"blocksize": 2, "mode": "CRD"}, opset=25)]


@kernel
def trilu(x: Tensor, out: Output, k: int, upper: bool):
    r = out.index[out.ndim - 2]
    c = out.index[out.ndim - 1]
    keep = c - r >= k if upper else c - r <= k
    v = x.flat[out.flat]
    return v if keep else cast(0, out.dtype)


class Trilu(OpDef):
    op_type = "Trilu"
    since_version = 14
    value_inputs = (1,)

    def _k(self, node: Node, values) -> int | None:
        if not has_input(node, 1):
            return 0
        found = input_ints(self, node, values, 1)
        return None if found is None else found[0]

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        if rank_of(self, node, x) < 2:
            raise self.fail(node, "input must have rank >= 2")
        assert x is not None
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        k = self._k(node, inputs)
        fn = np.triu if int(self.attr(node, "upper", 1)) else np.tril
        return [fn(x, k)]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        k = self._k(node, values)
        require_values(node, "the k input", k)
        low = Lowering()
        low.launch(trilu, [In(0)], Out(0), k=int(k), upper=bool(self.attr(node, "upper", 1)))
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) - 7
        return [OpCase("upper", [x]), OpCase("lower_k", [x, np.array(-1, np.int64)],
                                              {"upper": 0}),
                OpCase("upper_k_big", [x, np.array(9, np.int64)]),
                OpCase("int64", [x.astype(np.int64), np.array(1, np.int64)]),
                OpCase("size0", [np.zeros((0, 3), np.float32)])]


@kernel
def reverse_sequence(x: Tensor, lens: Tensor, out: Output, batch_axis: int, time_axis: int):
    b = out.index[batch_axis]
    t = out.index[time_axis]
    n = cast(lens.flat[b], i32)
    src = n - 1 - t if t < n else t
    off = 0
    for d in static_range(out.ndim):
        if d == time_axis:
            off = off + src * x.strides[d]
        else:
            off = off + out.index[d] * x.strides[d]
    return x.flat[off]


class ReverseSequence(OpDef):
    op_type = "ReverseSequence"
    since_version = 10

    def _axes(self, node: Node, rank: int) -> tuple[int, int]:
        b = normalize_axis(node, int(self.attr(node, "batch_axis", 1)), rank)
        t = normalize_axis(node, int(self.attr(node, "time_axis", 0)), rank)
        if {b, t} != {0, 1}:
            raise self.fail(node, "batch_axis and time_axis must be 0 and 1")
        return b, t

    def infer(self, node: Node, inputs, values) -> list[TensorInfo]:
        x = inputs[0] if inputs else None
        rank = rank_of(self, node, x)
        if rank < 2:
            raise self.fail(node, "input must have rank >= 2")
        self._axes(node, rank)
        assert x is not None
        return [x]

    def reference(self, node: Node, inputs) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        b, t = self._axes(node, x.ndim)
        y = x.copy()
        for i, n in enumerate(np.asarray(inputs[1]).reshape(-1)):
            src = [slice(None)] * x.ndim
            src[b], src[t] = i, slice(0, int(n))
            y[tuple(src)] = np.flip(x[tuple(src)], axis=0 if t < b else t - 1)
        return [y]

    def lower(self, node: Node, inputs, outputs, values) -> Lowering:
        b, t = self._axes(node, len(static(inputs[0])))
        kernel_dtype(node, inputs[0])
        low = Lowering()
        low.launch(reverse_sequence, [In(0), In(1)], Out(0), batch_axis=b, time_axis=t)
        return low

    def cases(self) -> list[OpCase]:
        x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
        return [OpCase("time0", [x, np.array([4, 1, 3], np.int64)]),
                OpCase("batch0", [x, np.array([1, 2, 3, 2], np.int32)],
                       {"batch_axis": 0, "time_axis": 1})]


OPS: list[type[OpDef]] = [Pad, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence]
