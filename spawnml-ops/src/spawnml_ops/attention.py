"""The attention family: Attention (opset 23+), FlexAttention (ai.onnx.preview), and the
transformer-block ops in ``attention_ops`` (RotaryEmbedding, RMSNormalization, SwiGLU,
LinearAttention, CausalConvWithState).

Attention is lowered to four launches (``attention_plan``): scores, row statistics,
probabilities and the probability-weighted sum of V; a KV cache adds two concatenation
launches writing the present_key / present_value outputs the scores then read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.graph.ir import Graph
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from .attention_flex import MODIFIERS, flex_body
from .attention_kernels import MASK_BOOL, MASK_FLOAT, attn_probs, kv_concat
from .attention_ops import OPS as BLOCK_OPS
from .attention_plan import (
    SCORES,
    SCORES_BIAS,
    AttnPlan,
    Bias,
    Operand,
    attention_launches,
    mask_strides,
    operand,
)
from .attention_ref import attention_reference, flex_reference
from .axes import kernel_dtype
from .common import copy, static_shape
from .conv_common import FLOATS, array_infos

_INPUTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


def _static(op: OpDef, node: Node, inputs, i: int) -> tuple[int, ...] | None:
    info = inputs[i] if len(inputs) > i else None
    if info is None:
        return None
    if not info.is_static:
        raise op.fail(node, f"input {_INPUTS[i]} needs a static shape, got {info.shape}")
    return static_shape(info)


def _contiguous(shape: Sequence[int]) -> tuple[int, int, int, int]:
    _, h, s, e = shape
    return (h * s * e, s * e, e, 1)


def _wanted(node: Node, outputs: Sequence[TensorInfo], i: int) -> bool:
    return i < len(outputs) and i < len(node.outputs) and node.outputs[i] != ""


class Attention(OpDef):
    """Scaled dot-product attention with GQA, masks, KV cache, softcap and windows."""

    op_type = "Attention"
    since_version = 23

    def _geometry(self, node: Node, inputs) -> dict:
        shapes = [_static(self, node, inputs, i) for i in range(min(len(inputs), 7))]
        shapes += [None] * (7 - len(shapes))
        if any(s is None for s in shapes[:3]):
            raise self.fail(node, "inputs Q, K and V are required")
        q_info = inputs[0]
        if q_info.dtype not in FLOATS and q_info.dtype != DType.bfloat16:
            raise self.fail(node, f"dtype {q_info.dtype} is not supported (float types only)")
        ranks = {len(s) for s in shapes[:3]}  # type: ignore[arg-type]
        if len(ranks) != 1:
            raise self.fail(node, f"Q, K and V must share one rank, got {shapes[:3]}")
        hq_attr = self.attr(node, "q_num_heads")
        hkv_attr = self.attr(node, "kv_num_heads")
        if ranks == {3} and (hq_attr is None or hkv_attr is None):
            raise self.fail(node, "attributes 'q_num_heads' and 'kv_num_heads' are required "
                                  "for 3-D inputs")
        q = operand(node, shapes[0], hq_attr, "Q")  # type: ignore[arg-type]
        k = operand(node, shapes[1], hkv_attr, "K")  # type: ignore[arg-type]
        v = operand(node, shapes[2], hkv_attr, "V")  # type: ignore[arg-type]
        batch = shapes[0][0]  # type: ignore[index]
        if k.heads != v.heads or k.seq != v.seq or q.feat != k.feat:
            raise self.fail(node, f"K {shapes[1]} and V {shapes[2]} do not match Q {shapes[0]}")
        if k.heads < 1 or q.heads % k.heads:
            raise self.fail(node, f"q_num_heads {q.heads} is not a multiple of kv_num_heads "
                                  f"{k.heads}")
        past_k, past_v = shapes[4], shapes[5]
        if (past_k is None) != (past_v is None):
            raise self.fail(node, "past_key and past_value must be given together")
        past = 0
        if past_k is not None:
            if past_k != (batch, k.heads, past_k[2], k.feat) or \
                    past_v != (batch, k.heads, past_k[2], v.feat):
                raise self.fail(node, f"past_key {past_k} / past_value {past_v} do not match "
                                      f"K and V")
            past = past_k[2]
        if shapes[6] is not None:
            if past_k is not None:
                raise self.fail(node, "nonpad_kv_seqlen cannot be combined with past_key")
            if shapes[6] != (batch,):
                raise self.fail(node, f"nonpad_kv_seqlen has shape {shapes[6]}, expected "
                                      f"({batch},)")
        if shapes[3] is not None and not 1 <= len(shapes[3]) <= 4:
            raise self.fail(node, f"attn_mask of shape {shapes[3]} must have rank 1..4")
        mode = int(self.attr(node, "qk_matmul_output_mode", 0))
        if mode not in (0, 1, 2, 3):
            raise self.fail(node, f"attribute 'qk_matmul_output_mode' = {mode} must be 0..3")
        for name in ("left_window_size", "right_window_size"):
            if int(self.attr(node, name, -1)) < -1:
                raise self.fail(node, f"attribute {name!r} must be -1 or >= 0")
        return dict(q=q, k=k, v=v, batch=batch, past=past, shapes=shapes, mode=mode,
                    rank=len(shapes[0]))  # type: ignore[arg-type]

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        g = self._geometry(node, inputs)
        q, k, v, batch, total = g["q"], g["k"], g["v"], g["batch"], g["past"] + g["k"].seq
        dt = inputs[0].dtype
        y = (batch, q.heads, q.seq, v.feat) if g["rank"] == 4 else \
            (batch, q.seq, q.heads * v.feat)
        outs = [TensorInfo(dt, y),
                TensorInfo(inputs[1].dtype, (batch, k.heads, total, k.feat)),
                TensorInfo(inputs[2].dtype, (batch, k.heads, total, v.feat)),
                TensorInfo(dt, (batch, q.heads, q.seq, total))]
        return outs[: max(1, len(node.outputs))]

    def _attrs(self, node: Node) -> dict:
        return dict(
            scale=self.attr(node, "scale"), causal=bool(int(self.attr(node, "is_causal", 0))),
            softcap=float(self.attr(node, "softcap", 0.0)),
            mode=int(self.attr(node, "qk_matmul_output_mode", 0)),
            left=int(self.attr(node, "left_window_size", -1)),
            right=int(self.attr(node, "right_window_size", -1)),
            q_heads=self.attr(node, "q_num_heads"), kv_heads=self.attr(node, "kv_num_heads"),
            f32_softmax=self.attr(node, "softmax_precision") is not None,
        )

    def reference(self, node, inputs) -> list[np.ndarray]:
        self._geometry(node, array_infos(inputs))
        arrays = list(inputs) + [None] * (7 - len(inputs))
        outs = attention_reference(*arrays[:7], **self._attrs(node))
        return outs[: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._geometry(node, inputs)
        kernel_dtype(node, inputs[0])
        a = self._attrs(node)
        q, k, v = g["q"], g["k"], g["v"]
        batch, past, shapes = g["batch"], g["past"], g["shapes"]
        dt = inputs[0].dtype
        low = Lowering()
        k_ref, v_ref = self._cache(low, node, outputs, k, v, past, batch)
        head = q.feat
        scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(head)
        bias = Bias(causal=a["causal"], past_len=past, left=a["left"], right=a["right"],
                    has_nonpad=shapes[6] is not None)
        mask = shapes[3]
        if mask is not None:
            bias.mask_mode = MASK_BOOL if inputs[3].dtype == DType.bool else MASK_FLOAT
            bias.m_st = mask_strides(mask)
            bias.m_len = mask[-1]
        plan = AttnPlan(
            q=In(0), k=k_ref[0], v=v_ref[0], q_op=q, k_st=k_ref[1], v_st=v_ref[1], batch=batch,
            kv_heads=k.heads, kv_len=past + k.seq, v_head=v.feat,
            scale=float(dt.numpy.type(np.sqrt(scale))) if dt != DType.float64 else
            float(np.sqrt(scale)),
            softcap=a["softcap"], half=dt == DType.float16, probs_dtype=dt,
            half_softmax=dt == DType.float16 and not a["f32_softmax"],
            mask=In(3) if mask is not None else None,
            nonpad=In(6) if shapes[6] is not None else None, bias=bias)
        scores, stats, probs = attention_launches(low, plan, Out(0))
        if _wanted(node, outputs, 3):
            extra = [plan.mask or plan.q, plan.nonpad or plan.q]
            if g["mode"] == 3:
                low.launch(copy, [probs], Out(3))
            else:
                low.launch(attn_probs, [scores, stats, *extra], Out(3),
                           mode=SCORES_BIAS if g["mode"] == 2 else SCORES, half=plan.half,
                           half_sm=False, **bias.consts())
        return low

    def _cache(self, low: Lowering, node: Node, outputs, k: Operand, v: Operand, past: int,
               batch: int) -> tuple[tuple[Ref, tuple], tuple[Ref, tuple]]:
        """present_key / present_value launches; the (ref, strides) the scores read."""
        refs = []
        for i, (op, src, past_in) in enumerate(((k, In(1), In(4)), (v, In(2), In(5)))):
            shape = (batch, op.heads, past + op.seq, op.feat)
            target: Ref | None = None
            if _wanted(node, outputs, i + 1):
                target = Out(i + 1)
            elif past:
                target = low.temp(outputs[0].dtype, shape)
            if target is not None:
                low.launch(kv_concat, [past_in if past else src, src], target,  # type: ignore[arg-type]
                           x_st=op.strides, past_len=past)
            if past:
                refs.append((target, _contiguous(shape)))
            else:
                refs.append((src, op.strides))
        return refs[0], refs[1]  # type: ignore[return-value]

    def cases(self) -> list[OpCase]:
        from .attention_cases import attention_cases

        return attention_cases()


class FlexAttention(OpDef):
    """ai.onnx.preview FlexAttention: softmax in float32 for float16 inputs (the reference's
    default precision). With score_mod / prob_mod graphs the session expands the node into
    primitive operators with the graphs inlined (``attention_flex``)."""

    domain = "ai.onnx.preview"
    op_type = "FlexAttention"
    since_version = 1

    def _check(self, node: Node, inputs) -> tuple[Operand, Operand, Operand, int]:
        for name in MODIFIERS:
            if name in node.attrs or name in node.subgraphs:
                raise UnsupportedOpError(f"{node.describe()}: with attribute {name!r} the node "
                                         "runs as its expansion (OpDef.function_body), inlined by "
                                         "the session")
        shapes = [static_shape(i) if i is not None and i.is_static else None
                  for i in inputs[:3]]
        if len(shapes) < 3 or any(s is None or len(s) != 4 for s in shapes):
            raise self.fail(node, f"Q, K and V must be static rank-4 tensors, got {shapes}")
        q, k, v = (operand(node, s, None, n) for s, n in zip(shapes, "QKV"))  # type: ignore[arg-type]
        if k.heads != v.heads or k.seq != v.seq or q.feat != k.feat or q.heads % k.heads:
            raise self.fail(node, f"Q {shapes[0]}, K {shapes[1]} and V {shapes[2]} do not match")
        if inputs[0].dtype not in FLOATS:
            raise self.fail(node, f"dtype {inputs[0].dtype} is not supported")
        return q, k, v, shapes[0][0]  # type: ignore[index]

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        q, _, v, b = self._check(node, inputs)
        return [TensorInfo(inputs[2].dtype, (b, q.heads, q.seq, v.feat))]

    def function_body(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Graph | None:
        """With score_mod / prob_mod graphs: primitive operators with the graphs inlined."""
        if not any(name in node.subgraphs for name in MODIFIERS):
            return None
        return flex_body(node, inputs)

    def _scale(self, node: Node, head: int) -> float:
        scale = self.attr(node, "scale")
        return float(1.0 / np.sqrt(head)) if scale is None else float(scale)

    def reference(self, node, inputs) -> list[np.ndarray]:
        q, _, _, _ = self._check(node, array_infos(inputs))
        return [flex_reference(*inputs[:3], scale=self._scale(node, q.feat))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        q, k, v, b = self._check(node, inputs)
        dt = inputs[0].dtype
        sqrt_scale = np.sqrt(np.float32(self._scale(node, q.feat)))
        low = Lowering()
        plan = AttnPlan(
            q=In(0), k=In(1), v=In(2), q_op=q, k_st=k.strides, v_st=v.strides, batch=b,
            kv_heads=k.heads, kv_len=k.seq, v_head=v.feat,
            scale=float(dt.numpy.type(sqrt_scale)) if dt == DType.float16 else float(sqrt_scale),
            half=dt == DType.float16, probs_dtype=DType.float32)
        attention_launches(low, plan, Out(0))
        return low

    def cases(self) -> list[OpCase]:
        from .attention_cases import flex_cases

        return flex_cases()


OPS: list[type[OpDef]] = [Attention, FlexAttention, *BLOCK_OPS]
