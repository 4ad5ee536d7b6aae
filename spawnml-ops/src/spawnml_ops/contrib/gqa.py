"""com.microsoft GroupQueryAttention: the onnxruntime-genai model builder's attention, with
packed or separate Q/K/V, a BNSH KV cache (past length or a shared max-length buffer),
per-batch ``seqlens_k``, rotary embedding, local windows, softcap and an attention bias.

Lowering: optional QKV split and rotary launches (the ai.onnx rotary kernel), a per-batch
length launch, the present_key / present_value writes (``gqa_cache``), then the shared
scaled-dot-product launches of ai.onnx Attention (``attention_plan``), whose key-padding
mode gives exactly GroupQueryAttention's masking: keys below each entry's length, query
row i at position length - S + i, causal and windowed from there.
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from ..attention_kernels import MASK_FLOAT
from ..attention_plan import AttnPlan, Bias, Operand, attention_launches, mask_strides
from .attention_kernels import gqa_cache, gqa_lengths, slice_last
from .common import DOMAIN, FLOATS, float_input, int_attr, optional, same_type
from .gqa_ref import gqa_reference
from .rotary import POS_GQA, rotary_positions, rotate

_UNSUPPORTED_INPUTS = {9: "position_ids", 11: "head_sink", 12: "k_scale", 13: "v_scale",
                       14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}
_UNSUPPORTED_ATTRS = {"smooth_softmax": 0, "qk_output": 0, "sliding_window_cache": 0,
                      "kv_cache_bit_width": 0}


def _seq_strides(seq: int, heads: int, d: int) -> tuple[int, int, int, int]:
    """(batch, head, sequence, feature) strides of a (B, S, heads * d) tensor."""
    return (seq * heads * d, d, heads * d, 1)


class GroupQueryAttention(OpDef):
    """Grouped-query attention with a KV cache, as onnxruntime's CPU kernel computes it."""

    domain = DOMAIN
    op_type = "GroupQueryAttention"
    since_version = 1
    dtypes = FLOATS
    value_inputs = (6,)  # total_sequence_length decides the present length and prompt mode
    # onnxruntime never reads the keys a row masks, the shared attention kernels add -inf to
    # them: NaN/Inf injected into masked keys would differ, unmasked ones agree.
    edge_values = False

    def _geometry(self, node: Node, inputs, total: int | None) -> dict:
        heads = int_attr(self, node, "num_heads", required=True)
        kv_heads = int_attr(self, node, "kv_num_heads", required=True)
        if heads < 1 or kv_heads < 1 or heads % kv_heads:
            raise self.fail(node, f"num_heads {heads} must be a positive multiple of "
                                  f"kv_num_heads {kv_heads}")
        for name, ok in _UNSUPPORTED_ATTRS.items():
            if int_attr(self, node, name, ok) != ok:
                raise UnsupportedOpError(f"{node.describe()}: attribute {name!r} = "
                                         f"{self.attr(node, name)} is not supported")
        for i, name in _UNSUPPORTED_INPUTS.items():
            if optional(inputs, i) is not None:
                raise UnsupportedOpError(f"{node.describe()}: input {name} is not supported")
        q = float_input(self, node, inputs, 0, "query")
        if len(q) != 3:
            raise self.fail(node, f"query must be 3-D (batch, sequence, hidden), got {q}")
        b, seq, hidden = q
        packed = optional(inputs, 1) is None
        if packed != (optional(inputs, 2) is None):
            raise self.fail(node, "key and value must be given together (or both omitted for "
                                  "packed QKV)")
        d = hidden // (heads + 2 * kv_heads) if packed else hidden // heads
        if d < 1 or hidden != d * (heads + 2 * kv_heads if packed else heads):
            raise self.fail(node, f"query hidden size {hidden} does not split into "
                                  f"{heads} heads" + (f" + 2 x {kv_heads}" if packed else ""))
        if not packed:
            for i, name in ((1, "key"), (2, "value")):
                if float_input(self, node, inputs, i, name) != (b, seq, kv_heads * d):
                    raise self.fail(node, f"{name} {inputs[i].shape} must be "  # type: ignore[union-attr]
                                          f"{(b, seq, kv_heads * d)}")
        past = 0
        if (optional(inputs, 3) is None) != (optional(inputs, 4) is None):
            raise self.fail(node, "past_key and past_value must be given together")
        if optional(inputs, 3) is not None:
            pk = float_input(self, node, inputs, 3, "past_key")
            if pk != float_input(self, node, inputs, 4, "past_value") or len(pk) != 4 or \
                    pk[:2] != (b, kv_heads) or pk[3] != d:
                raise self.fail(node, f"past_key {pk} / past_value must be (batch, "
                                      f"kv_num_heads, length, head) = {(b, kv_heads, '*', d)}")
            past = pk[2]
        same_type(self, node, inputs, [(1, "key"), (2, "value"), (3, "past_key"),
                                       (4, "past_value"), (7, "cos_cache"), (8, "sin_cache"),
                                       (10, "attention_bias")])
        for i, name, shape in ((5, "seqlens_k", (b,)), (6, "total_sequence_length", None)):
            info = optional(inputs, i)
            if info is None or info.dtype != DType.int32:
                raise self.fail(node, f"input {name} is required and must be int32")
            if shape is not None and info.shape is not None and tuple(info.shape) != shape:
                raise self.fail(node, f"{name} {info.shape} must be {shape}")
            if shape is None and info.shape is not None and int(np.prod(info.shape)) != 1:
                raise self.fail(node, f"{name} must be a scalar, got shape {info.shape}")
        rot = 0
        if int_attr(self, node, "do_rotary", 0, choices=(0, 1)):
            cos = float_input(self, node, inputs, 7, "cos_cache")
            if float_input(self, node, inputs, 8, "sin_cache") != cos or len(cos) != 2 or \
                    not 0 < cos[1] * 2 <= d:
                raise self.fail(node, f"cos_cache {cos} / sin_cache must be (max_sequence, "
                                      f"rotary_dim / 2) with rotary_dim <= head size {d}")
            rot = cos[1] * 2
        causal = bool(int_attr(self, node, "causal", 1, choices=(0, 1)))
        window = int_attr(self, node, "local_window_size", -1)
        if window < -1 or window == 0 or (window > 0 and not causal):
            raise self.fail(node, f"attribute 'local_window_size' = {window} must be -1, or "
                                  "> 0 with causal attention")
        length = None if total is None else max(int(total), past)
        if total is not None and (total < seq if past == 0 else total < 1):
            raise self.fail(node, f"total_sequence_length {total} is below the sequence "
                                  f"length {seq}")
        bias = optional(inputs, 10)
        if bias is not None:
            shape = float_input(self, node, inputs, 10, "attention_bias")
            if len(shape) != 4 or shape[0] not in (1, b) or shape[1] not in (1, heads) or \
                    shape[2] != seq:
                raise self.fail(node, f"attention_bias {shape} must be (batch or 1, num_heads "
                                      f"or 1, {seq}, total_sequence_length)")
        return dict(b=b, seq=seq, d=d, heads=heads, kv_heads=kv_heads, packed=packed,
                    past=past, length=length, rot=rot, causal=causal, window=window,
                    bias=None if bias is None else tuple(bias.shape))  # type: ignore[arg-type]

    def _total(self, values) -> int | None:
        v = values[6] if len(values) > 6 else None
        return None if v is None else int(np.asarray(v).reshape(-1)[0])

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        g = self._geometry(node, inputs, self._total(values))
        dt = inputs[0].dtype
        present = TensorInfo(dt, (g["b"], g["kv_heads"], g["length"], g["d"]))
        outs = [TensorInfo(dt, (g["b"], g["seq"], g["heads"] * g["d"])), present, present]
        if len(node.outputs) > 3 and node.outputs[3]:
            raise UnsupportedOpError(f"{node.describe()}: output output_qk is not supported")
        return outs[: max(1, len(node.outputs))]

    def _attrs(self, node: Node) -> dict:
        scale = float(self.attr(node, "scale", 0.0))
        return dict(scale=scale or None, softcap=float(self.attr(node, "softcap", 0.0)),
                    interleaved=bool(int_attr(self, node, "rotary_interleaved", 0,
                                              choices=(0, 1))))

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        arrays = list(inputs) + [None] * (11 - len(inputs))
        total = int(np.asarray(arrays[6]).reshape(-1)[0])
        g = self._geometry(node, array_infos(arrays), total)
        outs = gqa_reference(*arrays[:6], total, arrays[7], arrays[8], arrays[10],
                             heads=g["heads"], kv_heads=g["kv_heads"], window=g["window"],
                             causal=g["causal"], rotary=g["rot"] > 0, **self._attrs(node))
        return outs[: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._geometry(node, inputs, self._total(values))
        if g["length"] is None:
            # Only output 0 is wanted (present outputs would have an unknown shape): a cache
            # of past + S rows holds every key a valid step reads (T <= past + S, or the
            # shared buffer's length); keys at or beyond each entry's length are masked.
            g["length"] = g["past"] + g["seq"]
        a = self._attrs(node)
        b, seq, d, hq, hkv = g["b"], g["seq"], g["d"], g["heads"], g["kv_heads"]
        dt = inputs[0].dtype
        low = Lowering()
        q: Ref = In(0)
        k: Ref = In(1)
        v: Ref = In(2)
        if g["packed"]:
            q, k, v = (low.temp(dt, (b, seq, n * d)) for n in (hq, hkv, hkv))
            for ref, off in ((q, 0), (k, hq * d), (v, (hq + hkv) * d)):
                low.launch(slice_last, [In(0)], ref, offset=off)
        lens = low.temp(DType.int32, (b,))
        low.launch(gqa_lengths, [In(5), In(6)], lens, seq=seq)
        if g["rot"]:
            pos = low.temp(DType.int32, (b, seq))
            low.launch(rotary_positions, [In(6), In(5)], pos, mode=POS_GQA)
            rotated = []
            for x, n in ((q, hq), (k, hkv)):
                y = low.temp(dt, (b, seq, n * d))
                rotate(low, x, In(7), In(8), pos, y, (b, seq, n * d), d, g["rot"],
                       a["interleaved"])
                rotated.append(y)
            q, k = rotated
        present = []
        for i, (new, past_in) in enumerate(((k, In(3)), (v, In(4)))):
            shape = (b, hkv, g["length"], d)
            want = i + 1 < len(node.outputs) and node.outputs[i + 1] != ""
            target = Out(i + 1) if want else low.temp(dt, shape)
            low.launch(gqa_cache, [past_in if g["past"] else new, new, lens], target,
                       new_st=_seq_strides(seq, hkv, d), seq=seq, has_past=g["past"] > 0)
            present.append(target)
        length = g["length"]
        contiguous = (hkv * length * d, length * d, d, 1)
        scale = a["scale"] or 1.0 / np.sqrt(d)
        # onnxruntime's window holds local_window_size keys, the query's own included
        bias = Bias(has_nonpad=True, causal=g["causal"], left=max(-1, g["window"] - 1))
        if g["bias"] is not None:
            bias.mask_mode, bias.m_st, bias.m_len = MASK_FLOAT, mask_strides(g["bias"]), \
                g["bias"][-1]
        plan = AttnPlan(q=q, k=present[0], v=present[1],
                        q_op=Operand(hq, seq, d, _seq_strides(seq, hq, d)), k_st=contiguous,
                        v_st=contiguous, batch=b, kv_heads=hkv, kv_len=length, v_head=d,
                        scale=float(np.sqrt(np.float32(scale))), softcap=a["softcap"],
                        mask=In(10) if g["bias"] is not None else None, nonpad=lens,
                        bias=bias)
        attention_launches(low, plan, Out(0))
        return low

    def cases(self) -> list[OpCase]:
        from .gqa_cases import gqa_cases

        return gqa_cases()


OPS: list[type[OpDef]] = [GroupQueryAttention]
