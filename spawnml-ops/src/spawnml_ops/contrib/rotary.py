"""com.microsoft RotaryEmbedding, and the rotary helpers GroupQueryAttention shares.

The rotation itself is the ai.onnx RotaryEmbedding kernel (``attention_ops.rotary``) and
its numpy reference; this module only turns onnxruntime's position forms into a (batch,
sequence) int32 position tensor: explicit ``position_ids``, a single start offset, or the
positions GroupQueryAttention derives from ``seqlens_k``.
"""


from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.kernel import Output, Tensor, cast, i32, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from ..attention_ops import RotaryEmbedding as OnnxRotary, rotary
from .common import DOMAIN, FLOATS, float_input, int_attr, optional, rand

POS_OFFSET, POS_GQA = 0, 1


@kernel
def rotary_positions(pos: Tensor, seqlens: Tensor, out: Output, mode: int):
    """out[b, s]: mode 0, pos[0] + s (a start offset); mode 1, GroupQueryAttention's
    position of query row s: its cached length minus the sequence plus s, or s in a first
    prompt (pos holds total_sequence_length), where padding rows (s > seqlens_k[b]) get 1."""
    b = out.index[0]
    s = out.index[1]
    if mode == 0:
        return cast(pos.flat[0], i32) + s
    seq = out.shape[1]
    total = cast(seqlens.flat[b], i32) + 1
    if cast(pos.flat[0], i32) == seq:
        return s if s < total else 1
    return total - seq + s


def rotate(low: Lowering, x: Ref, cos: Ref, sin: Ref, pos: Ref, out: Ref, shape: tuple,
           head: int, rot: int, interleaved: bool) -> None:
    """Launch the ai.onnx rotary kernel on a 3-D (B, S, H * head) or 4-D (B, H, S, head)
    tensor with (B, S) positions."""
    low.launch(rotary, [x, cos, sin, pos], out, head=head, rot=rot, interleaved=interleaved,
               has_pos=True, seq=shape[2 if len(shape) == 4 else 1])


def rotate_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pos: np.ndarray,
                     heads: int, rot: int, interleaved: bool) -> np.ndarray:
    """The ai.onnx RotaryEmbedding reference with (B, S) positions."""
    attrs = {"interleaved": int(interleaved), "rotary_embedding_dim": rot}
    if x.ndim == 3:
        attrs["num_heads"] = heads
    node = Node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], attrs, name="rotary",
                opset=23)
    return OnnxRotary().reference(node, [x, cos, sin, pos.astype(np.int64)])[0]


class RotaryEmbedding(OpDef):
    """Rotary position embedding (input, position_ids, cos_cache, sin_cache); position_ids
    is (B, S) or one start offset."""

    domain = DOMAIN
    op_type = "RotaryEmbedding"
    since_version = 1
    dtypes = FLOATS

    def _check(self, node: Node, inputs) -> dict:
        shape = float_input(self, node, inputs, 0, "input")
        pos = optional(inputs, 1)
        if pos is None or pos.dtype != DType.int64 or not pos.is_static:
            raise self.fail(node, "input position_ids is required, int64 with a static shape")
        cos = float_input(self, node, inputs, 2, "cos_cache")
        if float_input(self, node, inputs, 3, "sin_cache") != cos or len(cos) != 2:
            raise self.fail(node, f"cos_cache {cos} and sin_cache must be one 2-D shape")
        if int_attr(self, node, "is_packed_batching", 0, choices=(0, 1)):
            raise UnsupportedOpError(f"{node.describe()}: is_packed_batching = 1 is not "
                                     "supported")
        if float(self.attr(node, "scale", 1.0)) != 1.0:
            raise UnsupportedOpError(f"{node.describe()}: attribute 'scale' != 1 is not "
                                     "supported")
        rot_attr = int_attr(self, node, "rotary_embedding_dim", 0)
        heads = int_attr(self, node, "num_heads", 0)
        if len(shape) == 4:
            heads, head = shape[1], shape[3]
        elif len(shape) == 3:
            if rot_attr and not heads:
                raise self.fail(node, "attribute 'num_heads' is required with "
                                      "'rotary_embedding_dim'")
            head = shape[2] // heads if heads else cos[1] * 2
            if not head or shape[2] % head:
                raise self.fail(node, f"hidden size {shape[2]} is not a multiple of the head "
                                      f"size {head}")
            heads = shape[2] // head
        else:
            raise self.fail(node, f"input must be 3-D or 4-D, got {shape}")
        rot = rot_attr or head
        if rot > head or rot % 2 or cos[1] != rot // 2:
            raise self.fail(node, f"cos_cache {cos} does not match the rotary dimension {rot} "
                                  f"(head size {head})")
        batch, seq = shape[0], shape[2 if len(shape) == 4 else 1]
        if tuple(pos.shape) not in ((1,), (batch, seq)):  # type: ignore[arg-type]
            raise self.fail(node, f"position_ids {pos.shape} must be (1,) or {(batch, seq)}")
        return dict(shape=shape, heads=heads, head=head, rot=rot, offset=pos.shape == (1,),
                    interleaved=bool(int_attr(self, node, "interleaved", 0, choices=(0, 1))))

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        self._check(node, inputs)
        return [inputs[0]]

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        g = self._check(node, array_infos(inputs))
        x, pos, cos, sin = inputs[:4]
        b, s = g["shape"][0], g["shape"][2 if x.ndim == 4 else 1]
        if g["offset"]:
            pos = np.broadcast_to(pos[0] + np.arange(s), (b, s))
        return [rotate_reference(x, cos, sin, pos, g["heads"], g["rot"], g["interleaved"])]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._check(node, inputs)
        low = Lowering()
        pos: Ref = In(1)
        if g["offset"]:
            shape = g["shape"]
            pos = low.temp(DType.int32, (shape[0], shape[2 if len(shape) == 4 else 1]))
            low.launch(rotary_positions, [In(1), In(1)], pos, mode=POS_OFFSET)
        rotate(low, In(0), In(2), In(3), pos, Out(0), g["shape"], g["head"], g["rot"],
               g["interleaved"])
        return low

    def cases(self) -> list[OpCase]:
        x3, x4 = rand(0, 2, 3, 16), rand(1, 2, 2, 3, 8)
        cos, sin = np.cos(rand(2, 12, 4)), np.sin(rand(3, 12, 4))
        pos = np.array([[0, 1, 2], [5, 9, 3]], np.int64)
        start = np.array([4], np.int64)
        return [
            OpCase("3d_pos", [x3, pos, cos, sin], rtol=1e-5, atol=1e-5),
            OpCase("3d_offset_interleaved", [x3, start, cos, sin], {"interleaved": 1},
                   rtol=1e-5, atol=1e-5),
            OpCase("4d_pos", [x4, pos, cos, sin], rtol=1e-5, atol=1e-5),
            OpCase("3d_partial", [x3, pos, cos[:, :2], sin[:, :2]],
                   {"rotary_embedding_dim": 4, "num_heads": 2}, rtol=1e-5, atol=1e-5),
            OpCase("f16", [x3.astype(np.float16), start, cos.astype(np.float16),
                           sin.astype(np.float16)], rtol=2e-3, atol=2e-3),
        ]


OPS: list[type[OpDef]] = [RotaryEmbedding]
