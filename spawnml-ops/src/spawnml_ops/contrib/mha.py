"""com.microsoft MultiHeadAttention: 3-D query/key/value (key/value also as 4-D BNSH for
cross attention), the input-projection bias, key padding mask, attention bias, past
key/value with present outputs, and ``unidirectional`` (causal).

Lowered to the ai.onnx Attention launches (``attention_plan``) with the ai.onnx KV-cache
concatenation (``kv_concat``); a key padding mask is folded with the attention bias into one
additive mask (``mha_mask``), onnxruntime's ``mask_filter_value`` where a key is padding.
"""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from ..attention_kernels import MASK_FLOAT, kv_concat
from ..attention_plan import AttnPlan, Bias, Operand, attention_launches, mask_strides
from ..attention_ref import attention_reference
from .attention_kernels import add_bias_slice, mha_mask
from .common import DOMAIN, FLOATS, float_input, int_attr, optional, rand, same_type


def _operand(shape: tuple[int, ...], heads: int) -> Operand:
    """(B, H, S, E) view of a (B, S, H * E) or (B, H, S, E) tensor."""
    if len(shape) == 4:
        _, h, s, e = shape
        return Operand(h, s, e, (h * s * e, s * e, e, 1))
    _, s, hidden = shape
    e = hidden // heads
    return Operand(heads, s, e, (s * hidden, e, hidden, 1))


def _wanted(node: Node, i: int) -> bool:
    return i < len(node.outputs) and node.outputs[i] != ""


class MultiHeadAttention(OpDef):
    """Multi-head self/cross attention as onnxruntime's CPU kernel computes it."""

    domain = DOMAIN
    op_type = "MultiHeadAttention"
    since_version = 1
    dtypes = FLOATS

    def _geometry(self, node: Node, inputs) -> dict:
        heads = int_attr(self, node, "num_heads", required=True)
        if heads < 1:
            raise self.fail(node, f"attribute 'num_heads' = {heads} must be positive")
        for i, name in ((8, "past_sequence_length"), (9, "cache_indirection")):
            if optional(inputs, i) is not None:
                raise UnsupportedOpError(f"{node.describe()}: input {name} is not supported")
        if _wanted(node, 3):
            raise UnsupportedOpError(f"{node.describe()}: output qk is not supported")
        q = float_input(self, node, inputs, 0, "query")
        if len(q) != 3:
            raise UnsupportedOpError(f"{node.describe()}: query {q} must be 3-D (packed QKV "
                                     "is not supported)")
        if optional(inputs, 1) is None or optional(inputs, 2) is None:
            raise UnsupportedOpError(f"{node.describe()}: key and value are required (packed "
                                     "QKV is not supported)")
        k = float_input(self, node, inputs, 1, "key")
        v = float_input(self, node, inputs, 2, "value")
        b, s, hidden = q
        if hidden % heads:
            raise self.fail(node, f"query hidden size {hidden} is not a multiple of num_heads "
                                  f"{heads}")
        if len(k) != len(v) or len(k) not in (3, 4) or k[0] != b or v[0] != b:
            raise self.fail(node, f"key {k} and value {v} must both be (batch, length, hidden) "
                                  "or (batch, num_heads, length, head)")
        qo, ko, vo = _operand(q, heads), _operand(k, heads), _operand(v, heads)
        if ko.feat != qo.feat or ko.heads != heads or vo.heads != heads or ko.seq != vo.seq \
                or (len(k) == 3 and k[2] % heads) or (len(v) == 3 and v[2] % heads):
            raise self.fail(node, f"key {k} / value {v} do not match query {q} with "
                                  f"{heads} heads")
        bias = optional(inputs, 3)
        if bias is not None:
            if len(k) == 4:
                raise UnsupportedOpError(f"{node.describe()}: bias with 4-D key/value is not "
                                         "supported")
            want = (2 * hidden + v[2],)
            if float_input(self, node, inputs, 3, "bias") != want:
                raise self.fail(node, f"bias {bias.shape} must be {want}")
        past = 0
        if (optional(inputs, 6) is None) != (optional(inputs, 7) is None):
            raise self.fail(node, "past_key and past_value must be given together")
        if optional(inputs, 6) is not None:
            if len(k) == 4:
                raise self.fail(node, "past_key cannot be combined with 4-D key/value")
            pk = float_input(self, node, inputs, 6, "past_key")
            pv = float_input(self, node, inputs, 7, "past_value")
            if pk[:2] != (b, heads) or pk[3] != ko.feat or pv != (*pk[:3], vo.feat):
                raise self.fail(node, f"past_key {pk} / past_value {pv} must be (batch, "
                                      "num_heads, past, head)")
            past = pk[2]
        total = past + ko.seq
        same_type(self, node, inputs, [(1, "key"), (2, "value"), (3, "bias"),
                                       (5, "attention_bias"), (6, "past_key"),
                                       (7, "past_value")])
        pad = optional(inputs, 4)
        pad_shape = None
        if pad is not None:
            if pad.dtype != DType.int32 or not pad.is_static:
                raise self.fail(node, "key_padding_mask must be int32 with a static shape")
            pad_shape = tuple(pad.shape)  # type: ignore[arg-type]
            if pad_shape not in ((b,), (b, total), (b, s, total)):
                raise UnsupportedOpError(f"{node.describe()}: key_padding_mask {pad_shape} "
                                         f"(supported: {(b,)}, {(b, total)}, {(b, s, total)})")
        att = None
        if optional(inputs, 5) is not None:
            att = float_input(self, node, inputs, 5, "attention_bias")
            if len(att) != 4 or att[0] not in (1, b) or att[1] not in (1, heads) or \
                    att[2:] != (s, total):
                raise self.fail(node, f"attention_bias {att} must be (batch or 1, num_heads or "
                                      f"1, {s}, {total})")
        return dict(b=b, s=s, heads=heads, q=qo, k=ko, v=vo, past=past, total=total,
                    pad=pad_shape, att=att, bias=bias is not None, rank_k=len(k))

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        g = self._geometry(node, inputs)
        dt = inputs[0].dtype
        b, n, t = g["b"], g["heads"], g["total"]
        outs = [TensorInfo(dt, (b, g["s"], n * g["v"].feat)),
                TensorInfo(dt, (b, n, t, g["k"].feat)), TensorInfo(dt, (b, n, t, g["v"].feat))]
        return outs[: max(1, len(node.outputs))]

    def _attrs(self, node: Node) -> dict:
        return dict(scale=self.attr(node, "scale"),
                    causal=bool(int_attr(self, node, "unidirectional", 0, choices=(0, 1))),
                    filter=float(self.attr(node, "mask_filter_value", -10000.0)))

    def reference(self, node, inputs) -> list[np.ndarray]:
        from ..conv_common import array_infos

        x = list(inputs) + [None] * (8 - len(inputs))
        g = self._geometry(node, array_infos(x))
        a = self._attrs(node)
        q, k, v = x[:3]
        if g["bias"]:
            hidden = q.shape[2]
            q, k, v = (t + x[3][o: o + t.shape[2]] for t, o in
                       ((q, 0), (k, hidden), (v, 2 * hidden)))
        mask = None
        if g["pad"] is not None or g["att"] is not None:
            mask = np.zeros((g["b"], 1, g["s"], g["total"]), np.float32)
            if g["att"] is not None:
                mask = mask + x[5].astype(np.float32)
            if g["pad"] is not None:
                pad = x[4]
                keep = np.arange(g["total"])[None, :] < pad[:, None] if pad.ndim == 1 else \
                    pad != 0
                keep = keep.reshape(g["b"], 1, -1 if pad.ndim == 3 else 1, g["total"])
                mask = mask + np.where(keep, 0.0, a["filter"]).astype(np.float32)
        f = np.float32
        outs = attention_reference(
            q.astype(f), k.astype(f), v.astype(f), mask,
            None if x[6] is None else x[6].astype(f), None if x[7] is None else x[7].astype(f),
            scale=a["scale"], causal=a["causal"], q_heads=g["heads"], kv_heads=g["heads"])
        return [o.astype(q.dtype) for o in outs[:3]][: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        g = self._geometry(node, inputs)
        a = self._attrs(node)
        dt = inputs[0].dtype
        low = Lowering()
        refs: list[Ref] = [In(0), In(1), In(2)]
        if g["bias"]:
            hidden = inputs[0].shape[2]
            for i, off in enumerate((0, hidden, 2 * hidden)):
                refs[i] = low.temp(dt, tuple(inputs[i].shape))  # type: ignore[arg-type]
                low.launch(add_bias_slice, [In(i), In(3)], refs[i], offset=off)
        b, n, past, total = g["b"], g["heads"], g["past"], g["total"]
        kv = []
        for i, (op, src, past_in) in enumerate(((g["k"], refs[1], In(6)),
                                                 (g["v"], refs[2], In(7)))):
            target: Ref | None = Out(i + 1) if _wanted(node, i + 1) else None
            if target is None and past:
                target = low.temp(dt, (b, n, total, op.feat))
            if target is None:
                kv.append((src, op.strides))
                continue
            low.launch(kv_concat, [past_in if past else src, src], target, x_st=op.strides,
                       past_len=past)
            kv.append((target, (n * total * op.feat, total * op.feat, op.feat, 1)))
        bias = Bias(causal=a["causal"], past_len=past)
        mask: Ref | None = None
        if g["pad"] is not None:
            heads = 1 if g["att"] is None else g["att"][1]
            mask = low.temp(DType.float32, (b, heads, g["s"], total))
            pad_st = (g["s"] * total, total) if len(g["pad"]) == 3 else (total, 0)
            low.launch(mha_mask, [In(4), In(5) if g["att"] else In(4)], mask,
                       has_pad=True, has_bias=g["att"] is not None, pad_st=pad_st,
                       filter_value=a["filter"])
            shape = (b, heads, g["s"], total)
        elif g["att"] is not None:
            mask, shape = In(5), g["att"]
        if mask is not None:
            bias.mask_mode, bias.m_st, bias.m_len = MASK_FLOAT, mask_strides(shape), total
        scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(g["q"].feat)
        plan = AttnPlan(q=refs[0], k=kv[0][0], v=kv[1][0], q_op=g["q"], k_st=kv[0][1],
                        v_st=kv[1][1], batch=b, kv_heads=n, kv_len=total, v_head=g["v"].feat,
                        scale=float(np.sqrt(np.float32(scale))), mask=mask, bias=bias)
        attention_launches(low, plan, Out(0))
        return low

    def cases(self) -> list[OpCase]:
        b, s, n, h = 2, 3, 2, 8
        q, k, v = rand(0, b, s, n * h), rand(1, b, 4, n * h), rand(2, b, 4, n * h)
        past_k, past_v = rand(3, b, n, 2, h), rand(4, b, n, 2, h)
        heads = {"num_heads": n}
        pad = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32)
        tol = dict(rtol=1e-4, atol=1e-5)
        return [
            OpCase("cross", [q, k, v], heads, **tol),
            OpCase("self_bias_causal", [q, q, q, rand(5, 3 * n * h)],
                   {**heads, "unidirectional": 1}, **tol),
            OpCase("key_padding_attention_bias", [q, k, v, None, pad, rand(6, 1, n, s, 4)],
                   {**heads, "scale": 0.2}, **tol),
            OpCase("past_present", [q, q, q, None, None, None, past_k, past_v], heads,
                   n_outputs=3, **tol),
            OpCase("bnsh_key_value", [q, np.ascontiguousarray(k.reshape(b, 4, n, h)
                                                              .transpose(0, 2, 1, 3)),
                                      np.ascontiguousarray(v.reshape(b, 4, n, h)
                                                           .transpose(0, 2, 1, 3))], heads,
                   **tol),
            OpCase("f16", [x.astype(np.float16) for x in (q, k, v)], heads, rtol=2e-3,
                   atol=2e-3),
        ]


OPS: list[type[OpDef]] = [MultiHeadAttention]
