"""Recurrent-state ops of the attention family: LinearAttention and CausalConvWithState.

LinearAttention's state update is sequential in time, so it lowers to two launches per
step: the new (B, H_kv, d_k, d_v) state from the previous one (ping-pong float32
temporaries), and the output rewritten with this step's row (the rows of earlier steps
are carried over, so every launch still writes its whole output). That is O(T^2) copying
for long prefills, but decode steps (T = 1) cost two launches.
"""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spawnml.dtypes import DType
from spawnml.kernel import Output, Tensor, cast, f32, helper, kernel
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo

from .common import static_shape
from .conv_common import FLOATS, array_infos

RULES = ("linear", "gated", "delta", "gated_delta")


def _rand(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _shape(op: OpDef, node: Node, inputs, i: int, name: str, required=True):
    info = inputs[i] if len(inputs) > i else None
    if info is None:
        if required:
            raise op.fail(node, f"input {i} ({name}) is required")
        return None
    if info.dtype not in FLOATS or not info.is_static:
        raise op.fail(node, f"input {name} must be a float tensor of static shape, got "
                            f"{info.dtype} {info.shape}")
    return static_shape(info)


@kernel
def cast_copy(x: Tensor, out: Output):
    return cast(x.flat[out.flat], out.dtype)


# ------------------------------------------------------------------ LinearAttention


@helper
def la_gate(decay, b, t, h, d, gating, per_dim, heads, dk, steps):
    """exp(decay) for key dim d of head h at step t (1 without gating)."""
    g = 1.0
    if gating:
        if per_dim:
            g = exp(cast(decay.flat[(b * steps + t) * heads * dk + h * dk + d], f32))
        else:
            g = exp(cast(decay.flat[(b * steps + t) * heads + h], f32))
    return g


@kernel
def la_state(
    prev: Tensor, k: Tensor, v: Tensor, decay: Tensor, beta: Tensor, out: Output, t: int,
    has_prev: bool, gating: bool, per_dim: bool, delta: bool, beta_heads: int, steps: int,
):
    """S_t[b, h, d, m] = g * S[d, m] + k[d] * v'[m], v' = beta * (v - (g * S)^T k) for the
    delta rules (v' = v otherwise); S is the previous state (0 before the first step)."""
    b, h, d, m = out.index
    heads = out.shape[1]
    dk = out.shape[2]
    dv = out.shape[3]
    kb = (b * steps + t) * heads * dk + h * dk
    vv = cast(v.flat[(b * steps + t) * heads * dv + h * dv + m], f32)
    s = 0.0
    if has_prev:
        s = cast(prev.flat[out.flat], f32) * la_gate(decay, b, t, h, d, gating, per_dim,
                                                     heads, dk, steps)
        if delta:
            base = out.flat - d * dv
            r = 0.0
            for e in range(dk):
                g = la_gate(decay, b, t, h, e, gating, per_dim, heads, dk, steps)
                r = r + cast(prev.flat[base + e * dv], f32) * g * cast(k.flat[kb + e], f32)
            vv = vv - r
    if delta:
        bh = h if beta_heads > 1 else 0
        vv = vv * cast(beta.flat[(b * steps + t) * beta_heads + bh], f32)
    return s + cast(k.flat[kb + d], f32) * vv


@kernel
def la_output(
    state: Tensor, q: Tensor, prev: Tensor, out: Output, t: int, has_prev: bool, group: int,
    dk: int, dv: int, scale: float,
):
    """Row t of the (B, T, H_q * d_v) output: scale * q_t . S_t (GQA: S of head h // group);
    other rows are copied from ``prev`` (0 before the first step)."""
    b = out.index[0]
    tt = out.index[1]
    if tt != t:
        if has_prev:
            return cast(prev.flat[out.flat], out.dtype)
        return cast(0.0, out.dtype)
    h = out.index[2] // dv
    m = out.index[2] % dv
    qb = (b * out.shape[1] + t) * (out.shape[2] // dv) * dk + h * dk
    sb = ((b * state.shape[1] + h // group) * dk) * dv + m
    acc = 0.0
    for e in range(dk):
        acc = acc + cast(q.flat[qb + e], f32) * state.flat[sb + e * dv]
    return cast(acc * scale, out.dtype)


class LinearAttention(OpDef):
    """Recurrent linear attention with the linear / gated / delta / gated_delta rules."""

    op_type = "LinearAttention"
    since_version = 27

    def _check(self, node: Node, inputs) -> dict:
        q = _shape(self, node, inputs, 0, "query")
        k = _shape(self, node, inputs, 1, "key")
        v = _shape(self, node, inputs, 2, "value")
        rule = self.attr(node, "update_rule", "gated_delta")
        rule = rule.decode() if isinstance(rule, bytes) else rule
        if rule not in RULES:
            raise self.fail(node, f"attribute 'update_rule' = {rule!r} is not one of {RULES}")
        hq, hkv = self.attr(node, "q_num_heads"), self.attr(node, "kv_num_heads")
        if hq is None or hkv is None or hkv < 1 or hq % hkv:
            raise self.fail(node, "attributes 'q_num_heads' and 'kv_num_heads' are required, "
                                  "q_num_heads a multiple of kv_num_heads")
        if len(q) != 3 or len(k) != 3 or len(v) != 3 or q[:2] != k[:2] or q[:2] != v[:2] or \
                q[2] % hq or k[2] % hkv or v[2] % hkv or q[2] // hq != k[2] // hkv:
            raise self.fail(node, f"query {q}, key {k}, value {v} do not match the head counts")
        b, t = q[:2]
        dk, dv = k[2] // hkv, v[2] // hkv
        past = _shape(self, node, inputs, 3, "past_state", required=False)
        if past is not None and past != (b, hkv, dk, dv):
            raise self.fail(node, f"past_state {past} must be {(b, hkv, dk, dv)}")
        gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        decay = _shape(self, node, inputs, 4, "decay", required=False)
        beta = _shape(self, node, inputs, 5, "beta", required=False)
        if (decay is not None) != gating or (beta is not None) != delta:
            raise self.fail(node, f"update_rule {rule!r} needs decay: {gating}, beta: {delta}")
        if decay is not None and decay not in ((b, t, hkv), (b, t, hkv * dk)):
            raise self.fail(node, f"decay {decay} must be {(b, t, hkv)} or {(b, t, hkv * dk)}")
        if beta is not None and beta not in ((b, t, hkv), (b, t, 1)):
            raise self.fail(node, f"beta {beta} must be {(b, t, hkv)} or {(b, t, 1)}")
        scale = float(self.attr(node, "scale", 0.0)) or float(1.0 / np.sqrt(dk))
        return dict(b=b, t=t, hq=hq, hkv=hkv, dk=dk, dv=dv, gating=gating, delta=delta,
                    per_dim=decay is not None and decay[2] == hkv * dk, past=past is not None,
                    beta_heads=beta[2] if beta is not None else 1, scale=scale)

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        c = self._check(node, inputs)
        state_dt = inputs[3].dtype if c["past"] else inputs[0].dtype
        outs = [TensorInfo(inputs[0].dtype, (c["b"], c["t"], c["hq"] * c["dv"])),
                TensorInfo(state_dt, (c["b"], c["hkv"], c["dk"], c["dv"]))]
        return outs[: max(1, len(node.outputs))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        c = self._check(node, array_infos(inputs))
        arrays = list(inputs) + [None] * (6 - len(inputs))
        q, k, v, past, decay, beta = arrays[:6]
        b, t, hq, hkv, dk, dv = (c[n] for n in ("b", "t", "hq", "hkv", "dk", "dv"))
        q4 = q.astype(np.float32).reshape(b, t, hq, dk)
        k4 = k.astype(np.float32).reshape(b, t, hkv, dk)
        v4 = v.astype(np.float32).reshape(b, t, hkv, dv)
        state = np.zeros((b, hkv, dk, dv), np.float32) if past is None else \
            past.astype(np.float32)
        out = np.zeros((b, t, hq, dv), np.float32)
        for i in range(t):
            if c["gating"]:
                g = decay[:, i].astype(np.float32).reshape(b, hkv, -1)
                state = state * np.exp(g)[..., None]
            vt = v4[:, i]
            if c["delta"]:
                bt = beta[:, i].astype(np.float32).reshape(b, -1, 1)
                vt = bt * (vt - np.einsum("bhdm,bhd->bhm", state, k4[:, i]))
            state = state + k4[:, i][..., None] * vt[..., None, :]
            full = np.repeat(state, hq // hkv, axis=1)
            out[:, i] = c["scale"] * np.einsum("bhd,bhdm->bhm", q4[:, i], full)
        state_dt = past.dtype if past is not None else q.dtype
        return [out.reshape(b, t, hq * dv).astype(q.dtype), state.astype(state_dt)][
            : max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        c = self._check(node, inputs)
        low = Lowering()
        shape = (c["b"], c["hkv"], c["dk"], c["dv"])
        states = [low.temp(DType.float32, shape), low.temp(DType.float32, shape)]
        ys = [low.temp(DType.float32, outputs[0].shape), low.temp(DType.float32,  # type: ignore[arg-type]
                                                                     outputs[0].shape)]
        prev_s: Ref = In(3) if c["past"] else In(0)
        prev_y: Ref = In(0)
        dummy = In(0)
        for i in range(c["t"]):
            state = states[i % 2]
            low.launch(la_state, [prev_s, In(1), In(2), In(4) if c["gating"] else dummy,
                                  In(5) if c["delta"] else dummy], state, t=i,
                       has_prev=c["past"] or i > 0, gating=c["gating"], per_dim=c["per_dim"],
                       delta=c["delta"], beta_heads=c["beta_heads"], steps=c["t"])
            y: Ref = Out(0) if i == c["t"] - 1 else ys[i % 2]
            low.launch(la_output, [state, In(0), prev_y], y, t=i, has_prev=i > 0,  # type: ignore[arg-type]
                       group=c["hq"] // c["hkv"], dk=c["dk"], dv=c["dv"], scale=c["scale"])
            prev_s, prev_y = state, y
        if len(outputs) > 1 and node.outputs[1]:
            low.launch(cast_copy, [prev_s], Out(1))
        return low

    def cases(self) -> list[OpCase]:
        b, t, h, d = 2, 3, 2, 4
        q, k, v = _rand(0, b, t, h * d), _rand(1, b, t, h * d), _rand(2, b, t, h * d)
        past = _rand(3, b, h, d, d, scale=0.5)
        decay = -np.abs(_rand(4, b, t, h * d))
        beta = 1.0 / (1.0 + np.exp(-_rand(5, b, t, h)))
        heads = {"q_num_heads": h, "kv_num_heads": h}
        return [
            OpCase("linear", [q, k, v], {**heads, "update_rule": "linear"}, n_outputs=2),
            OpCase("gated_per_head_past", [q, k, v, past, decay[..., :h]],
                   {**heads, "update_rule": "gated"}, n_outputs=2, rtol=1e-4, atol=1e-5),
            OpCase("delta", [q, k, v, None, None, beta], {**heads, "update_rule": "delta"},
                   n_outputs=2, rtol=1e-4, atol=1e-5),
            OpCase("gated_delta_gqa", [_rand(6, b, t, 2 * h * d), k, v, past, decay, beta],
                   {"q_num_heads": 2 * h, "kv_num_heads": h, "scale": 0.3}, n_outputs=2,
                   rtol=1e-4, atol=1e-5),
        ]


# ------------------------------------------------------------------ CausalConvWithState


@helper
def padded_at(x, past, b, c, p, klen, has_past):
    """Element p of the left-padded (B, C, k - 1 + L) input (zeros without past_state)."""
    lead = klen - 1
    if p < lead:
        if has_past:
            return cast(past.flat[(b * x.shape[1] + c) * lead + p], f32)
        else:
            return 0.0
    else:
        return cast(x.flat[(b * x.shape[1] + c) * x.shape[2] + p - lead], f32)


@kernel
def causal_conv(
    x: Tensor, w: Tensor, bias: Tensor, past: Tensor, out: Output, klen: int, has_bias: bool,
    has_past: bool, silu: bool,
):
    """Depthwise causal conv1d over the padded input, plus bias, then optional SiLU."""
    b, c, pos = out.index
    acc = 0.0
    for i in range(klen):
        acc = acc + cast(w.flat[c * klen + i], f32) * padded_at(x, past, b, c, pos + i, klen,
                                                                 has_past)
    if has_bias:
        acc = acc + cast(bias.flat[c], f32)
    acc = cast(cast(acc, out.dtype), f32)
    if silu:
        acc = acc / (1.0 + exp(-acc))
    return cast(acc, out.dtype)


@kernel
def conv_state(x: Tensor, past: Tensor, out: Output, klen: int, has_past: bool):
    """present_state: the last k - 1 positions of the padded input."""
    b, c, p = out.index
    return cast(padded_at(x, past, b, c, p + x.shape[2], klen, has_past), out.dtype)


class CausalConvWithState(OpDef):
    op_type = "CausalConvWithState"
    since_version = 27

    def _check(self, node: Node, inputs) -> tuple[Sequence[int], int, str]:
        x = _shape(self, node, inputs, 0, "input")
        w = _shape(self, node, inputs, 1, "weight")
        if len(x) != 3 or len(w) != 3 or w[:2] != (x[1], 1) or w[2] < 1:
            raise self.fail(node, f"input {x} must be (B, C, L) and weight {w} (C, 1, k)")
        act = self.attr(node, "activation", "none")
        act = act.decode() if isinstance(act, bytes) else act
        if act not in ("none", "silu", "swish"):
            raise self.fail(node, f"attribute 'activation' = {act!r} is not none/silu/swish")
        bias = _shape(self, node, inputs, 2, "bias", required=False)
        if bias is not None and bias != (x[1],):
            raise self.fail(node, f"bias {bias} must be ({x[1]},)")
        past = _shape(self, node, inputs, 3, "past_state", required=False)
        if past is not None and past != (x[0], x[1], w[2] - 1):
            raise self.fail(node, f"past_state {past} must be {(x[0], x[1], w[2] - 1)}")
        return x, w[2], act

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x, k, _ = self._check(node, inputs)
        dt = inputs[0].dtype
        return [inputs[0], TensorInfo(dt, (x[0], x[1], k - 1))][: max(1, len(node.outputs))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x_shape, k, act = self._check(node, array_infos(inputs))
        arrays = list(inputs) + [None] * (4 - len(inputs))
        x, w, bias, past = arrays[:4]
        b, c, n = x_shape
        pad = np.zeros((b, c, k - 1), x.dtype) if past is None else past
        padded = np.concatenate([pad, x], axis=2)
        win = np.lib.stride_tricks.sliding_window_view(padded, k, axis=2)[:, :, :n]
        y = (win.astype(np.float32) * w[:, 0].astype(np.float32)[None, :, None]).sum(-1)
        if bias is not None:
            y = y + bias.astype(np.float32)[None, :, None]
        y = y.astype(x.dtype)
        if act != "none":
            t = y.astype(np.float32)
            y = (t / (1.0 + np.exp(-t))).astype(x.dtype)
        return [y, padded[:, :, n:]][: max(1, len(node.outputs))]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        _, k, act = self._check(node, inputs)
        has_bias = len(inputs) > 2 and inputs[2] is not None
        has_past = len(inputs) > 3 and inputs[3] is not None
        past = In(3) if has_past else In(0)
        low = Lowering()
        low.launch(causal_conv, [In(0), In(1), In(2) if has_bias else In(0), past], Out(0),
                   klen=k, has_bias=has_bias, has_past=has_past, silu=act != "none")
        if len(outputs) > 1 and node.outputs[1]:
            low.launch(conv_state, [In(0), past], Out(1), klen=k, has_past=has_past)
        return low

    def cases(self) -> list[OpCase]:
        x, w = _rand(0, 2, 3, 6), _rand(1, 3, 1, 4)
        bias, past = _rand(2, 3), _rand(3, 2, 3, 3)
        return [
            OpCase("plain", [x, w], n_outputs=2),
            OpCase("bias_past_silu", [x, w, bias, past], {"activation": "silu"}, n_outputs=2),
            OpCase("decode", [x[:, :, :1], w, bias, past], n_outputs=2),
            OpCase("short_input", [x[:, :, :2], _rand(4, 3, 1, 5)], n_outputs=2),
            OpCase("k1", [x, w[:, :, :1]], n_outputs=2),
        ]


OPS: list[type[OpDef]] = [LinearAttention, CausalConvWithState]
