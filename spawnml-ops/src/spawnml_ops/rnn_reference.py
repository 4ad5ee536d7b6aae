"""numpy reference of RNN, GRU and LSTM (float32 arithmetic, the ONNX equations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _sigmoid(v: np.ndarray, a: float, b: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


ACT_NUMPY: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "relu": lambda v, a, b: np.maximum(v, 0),
    "tanh": lambda v, a, b: np.tanh(v),
    "sigmoid": _sigmoid,
    "affine": lambda v, a, b: a * v + b,
    "leakyrelu": lambda v, a, b: np.where(v >= 0, v, a * v),
    "thresholdedrelu": lambda v, a, b: np.where(v > a, v, 0),
    "scaledtanh": lambda v, a, b: a * np.tanh(b * v),
    "hardsigmoid": lambda v, a, b: np.clip(a * v + b, 0, 1),
    "elu": lambda v, a, b: np.where(v >= 0, v, a * (np.exp(v) - 1)),
    "softsign": lambda v, a, b: v / (1 + np.abs(v)),
    "softplus": lambda v, a, b: np.maximum(v, 0) + np.log1p(np.exp(-np.abs(v))),
}
_BY_CODE = {
    0: "relu", 1: "tanh", 2: "sigmoid", 3: "affine", 4: "leakyrelu", 5: "thresholdedrelu",
    6: "scaledtanh", 7: "hardsigmoid", 8: "elu", 9: "softsign", 10: "softplus",
}


def rnn_reference(op_type: str, cfg: Any, inputs: list) -> list[np.ndarray]:
    """Y, Y_h (and Y_c for LSTM) of ``op_type`` for a checked RnnConfig ``cfg``."""
    x, w, r, bias, lens, h0, c0, p = (None if a is None else np.asarray(a) for a in inputs[:8])
    dt = x.dtype
    f32 = np.float32
    if cfg.layout:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    x, w, r = x.astype(f32), w.astype(f32), r.astype(f32)
    seq, batch, _ = x.shape
    hid, rows = cfg.hidden, w.shape[1]
    lens = np.full(batch, seq) if lens is None else lens.astype(np.int64)
    y = np.zeros((seq, cfg.dirs, batch, hid), f32)
    hs, cs = np.zeros((cfg.dirs, batch, hid), f32), np.zeros((cfg.dirs, batch, hid), f32)
    n = cfg.acts[0]

    def act(d: int, slot: int, v: np.ndarray, clip: bool = True) -> np.ndarray:
        k = 1 + 3 * (d * n + slot)
        if clip and cfg.clip > 0:
            v = np.clip(v, -cfg.clip, cfg.clip)
        code, a, b = cfg.acts[k:k + 3]
        with np.errstate(over="ignore"):
            return ACT_NUMPY[_BY_CODE[code]](v, f32(a), f32(b)).astype(f32)

    for d in range(cfg.dirs):
        wb = np.zeros(rows, f32) if bias is None else bias[d, :rows].astype(f32)
        rb = np.zeros(rows, f32) if bias is None else bias[d, rows:].astype(f32)
        pd = np.zeros(3 * hid, f32) if p is None else p[d].astype(f32)
        h = np.zeros((batch, hid), f32) if h0 is None else h0[d].astype(f32)
        c = np.zeros((batch, hid), f32) if c0 is None else c0[d].astype(f32)
        rev = d == 1 or cfg.reverse0
        for s in range(seq):
            t = seq - 1 - s if rev else s
            live = (t < lens)[:, None]
            xw = x[t] @ w[d].T + wb
            hr = h @ r[d].T + rb
            if op_type == "RNN":
                hn = act(d, 0, xw + hr)
            elif op_type == "GRU":
                z = act(d, 0, xw[:, :hid] + hr[:, :hid])
                rg = act(d, 0, xw[:, hid:2 * hid] + hr[:, hid:2 * hid])
                if cfg.lbr:
                    nn = act(d, 1, xw[:, 2 * hid:] + rg * hr[:, 2 * hid:])
                else:
                    nn = act(d, 1, xw[:, 2 * hid:] + (rg * h) @ r[d, 2 * hid:].T
                             + rb[2 * hid:])
                hn = (1 - z) * nn + z * h
            else:
                pre = xw + hr
                i = act(d, 0, pre[:, :hid] + pd[:hid] * c)
                f = 1 - i if cfg.input_forget else act(d, 0, pre[:, 2 * hid:3 * hid]
                                                       + pd[2 * hid:] * c)
                cn = f * c + i * act(d, 1, pre[:, 3 * hid:])
                o = act(d, 0, pre[:, hid:2 * hid] + pd[hid:2 * hid] * cn)
                hn = o * act(d, 2, cn, clip=False)
                c = np.where(live, cn, c)
            h = np.where(live, hn, h).astype(f32)
            y[t, d] = np.where(live, hn, 0)
        hs[d], cs[d] = h, c
    if cfg.layout:
        y, hs, cs = y.transpose(2, 0, 1, 3), hs.transpose(1, 0, 2), cs.transpose(1, 0, 2)
    outs = [y.astype(dt), hs.astype(dt)]
    if op_type == "LSTM":
        outs.append(cs.astype(dt))
    return outs
