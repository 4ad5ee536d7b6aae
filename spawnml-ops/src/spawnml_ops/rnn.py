"""Recurrent operators: RNN, GRU (linear_before_reset), LSTM (peepholes, input_forget).

Directions forward/reverse/bidirectional, initial states, sequence_lens, activations with
alpha/beta, clip, layout 0/1. Time steps are sequential launches (see ``rnn_kernels``):
per step one launch for the new state of every direction (plus one for GRU's r*H and
LSTM's cell state), and one appending it to Y, so Y costs O(seq) copies per step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spawnml.dtypes import DType
from spawnml.errors import UnsupportedOpError
from spawnml.op import Data, In, Lowering, Node, OpCase, OpDef, Out, Ref, TensorInfo, Tmp

from . import rnn_kernels as K
from .rnn_reference import ACT_NUMPY, rnn_reference

_FLOATS = (DType.float32, DType.float16, DType.float64)


@dataclass(frozen=True)
class RnnConfig:
    """A node's attributes, checked: what the reference and the kernels need."""

    dirs: int
    reverse0: bool  # direction 0 runs backwards (direction="reverse")
    hidden: int
    acts: tuple  # (n, code, alpha, beta, ...) see rnn_kernels.act
    clip: float
    layout: int
    lbr: bool = False
    input_forget: bool = False


class RecurrentOp(OpDef):
    since_version = 1
    gates: int  # gate rows per direction in W/R
    n_acts: int  # activations per direction
    default_acts: tuple[str, ...]
    n_states = 1  # Y_h (and Y_c for LSTM)

    def config(self, node: Node, w: TensorInfo | None) -> RnnConfig:
        direction = self.attr(node, "direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise self.fail(node, f"direction must be forward, reverse or bidirectional, "
                                  f"got {direction!r}")
        dirs = 2 if direction == "bidirectional" else 1
        hidden = self.attr(node, "hidden_size")
        if hidden is None:
            if w is None or w.shape is None or not isinstance(w.shape[1], int):
                raise self.fail(node, "hidden_size is missing and W's shape is unknown")
            hidden = w.shape[1] // self.gates
        hidden = int(hidden)
        if hidden < 1:
            raise self.fail(node, f"hidden_size must be positive, got {hidden}")
        layout = int(self.attr(node, "layout", 0))
        if layout not in (0, 1) or (layout and node.opset < 14):
            raise self.fail(node, f"layout must be 0 (or 1 from opset 14), got {layout}")
        clip = self.attr(node, "clip")
        if clip is not None and not float(clip) > 0:
            raise self.fail(node, f"clip must be positive, got {clip}")
        names = tuple(a.lower() for a in self.attr(node, "activations", ()))
        if not names:
            names = self.default_acts * dirs
        if len(names) != self.n_acts * dirs:
            raise self.fail(node, f"activations needs {self.n_acts * dirs} entries for "
                                  f"{direction}, got {len(names)}")
        alphas = list(self.attr(node, "activation_alpha", ()))
        betas = list(self.attr(node, "activation_beta", ()))
        acts: list = [self.n_acts]
        for name in names:
            if name not in K.ACTIVATIONS or name not in ACT_NUMPY:
                raise UnsupportedOpError(f"{node.describe()}: activation {name!r} is not "
                                         "supported")
            code = K.ACTIVATIONS[name]
            da, db = K.ALPHA_BETA_DEFAULTS.get(code, (None, None))
            # alpha/beta lists are consumed, in order, by the activations that take them
            a = (alphas.pop(0) if alphas else da) if da is not None else 0.0
            b = (betas.pop(0) if betas else db) if db is not None else 0.0
            acts += [code, float(a), float(b)]
        return RnnConfig(
            dirs=dirs, reverse0=direction == "reverse", hidden=hidden, acts=tuple(acts),
            clip=0.0 if clip is None else float(clip), layout=layout,
            lbr=bool(self.attr(node, "linear_before_reset", 0)),
            input_forget=bool(self.attr(node, "input_forget", 0)),
        )

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        if len(inputs) < 3 or any(i is None for i in inputs[:3]):
            raise self.fail(node, "expects inputs X, W, R")
        x, w = inputs[:2]
        cfg = self.config(node, w)
        if x.dtype not in _FLOATS:  # type: ignore[union-attr]
            raise self.fail(node, f"X must be a float tensor, got {x.dtype}")  # type: ignore[union-attr]
        for name, info in zip(("W", "R", "B"), inputs[1:4]):
            if info is not None and info.dtype is not x.dtype:  # type: ignore[union-attr]
                raise self.fail(node, f"{name} must be {x.dtype}, got {info.dtype}")  # type: ignore[union-attr]
        if x.shape is not None and len(x.shape) != 3:  # type: ignore[union-attr]
            raise self.fail(node, f"X must be 3-D, got shape {x.shape}")  # type: ignore[union-attr]
        seq, batch = (None, None) if x.shape is None else (  # type: ignore[union-attr]
            (x.shape[1], x.shape[0]) if cfg.layout else (x.shape[0], x.shape[1]))  # type: ignore[union-attr]
        n_in = None if x.shape is None else x.shape[2]  # type: ignore[union-attr]
        rows = self.gates * cfg.hidden
        expect = {1: (cfg.dirs, rows, n_in), 2: (cfg.dirs, rows, cfg.hidden),
                  3: (cfg.dirs, 2 * rows), 4: (batch,), 7: (cfg.dirs, 3 * cfg.hidden)}
        state = (batch, cfg.dirs, cfg.hidden) if cfg.layout else (cfg.dirs, batch, cfg.hidden)
        expect.update({5: state, 6: state})
        for i, want in expect.items():
            info = inputs[i] if len(inputs) > i else None
            if info is None or info.shape is None:
                continue
            if len(info.shape) != len(want) or any(
                isinstance(a, int) and isinstance(b, int) and a != b
                for a, b in zip(info.shape, want)
            ):
                raise self.fail(node, f"input {i} must have shape {want}, got {info.shape}")
        if len(inputs) > 4 and inputs[4] is not None and inputs[4].dtype is not DType.int32:
            raise self.fail(node, f"sequence_lens must be int32, got {inputs[4].dtype}")
        y = (batch, seq, cfg.dirs, cfg.hidden) if cfg.layout else (seq, cfg.dirs, batch,
                                                                   cfg.hidden)
        outs = [TensorInfo(x.dtype, y)] + [TensorInfo(x.dtype, state)] * self.n_states  # type: ignore[union-attr]
        return outs[: max(len(node.outputs), 1)]

    def reference(self, node, inputs) -> list[np.ndarray]:
        cfg = self.config(node, None if inputs[1] is None else TensorInfo(
            DType.float32, np.shape(inputs[1])))
        outs = rnn_reference(self.op_type, cfg, list(inputs) + [None] * (8 - len(inputs)))
        return outs[: max(len(node.outputs), 1)]

    # -- lowering ---------------------------------------------------------------------
    def lower(self, node, inputs, outputs, values) -> Lowering:
        cfg = self.config(node, inputs[1])
        x = inputs[0]
        seq, batch = (x.shape[1], x.shape[0]) if cfg.layout else (x.shape[0], x.shape[1])  # type: ignore[index]
        low = Lowering()
        dt = x.dtype  # type: ignore[union-attr]
        state_shape = (cfg.dirs, int(batch), cfg.hidden)  # type: ignore[arg-type]

        def opt(i: int, fill: np.ndarray) -> Ref:
            return In(i) if len(inputs) > i and inputs[i] is not None else Data(fill)

        bias = opt(3, np.zeros(1, np.float32))
        has_bias = len(inputs) > 3 and inputs[3] is not None
        lens = opt(4, np.full(int(batch), int(seq), np.int32))  # type: ignore[arg-type]
        zeros = np.zeros(state_shape, np.float32)
        h0_given = len(inputs) > 5 and inputs[5] is not None
        c0_given = len(inputs) > 6 and inputs[6] is not None
        h: Ref = opt(5, zeros)
        c: Ref = opt(6, zeros)
        h_bm, c_bm = bool(cfg.layout and h0_given), bool(cfg.layout and c0_given)
        want = [i < len(outputs) and (i >= len(node.outputs) or node.outputs[i] != "")
                for i in range(3)]
        ping = [low.temp(dt, state_shape), low.temp(dt, state_shape)]
        cping = [low.temp(dt, state_shape), low.temp(dt, state_shape)] if self.n_states > 1 \
            else []
        hist: Ref | None = None
        y_ping = [low.temp(dt, outputs[0].shape), low.temp(dt, outputs[0].shape)] \
            if want[0] and int(seq) > 1 else []  # type: ignore[arg-type]
        rh_tmp = low.temp(dt, state_shape) if self.op_type == "GRU" and not cfg.lbr else None
        common = {"rev0": cfg.reverse0, "x_bm": bool(cfg.layout), "has_bias": has_bias,
                  "acts": cfg.acts, "clip": cfg.clip}
        for s in range(int(seq)):  # type: ignore[arg-type]
            last = s == int(seq) - 1  # type: ignore[arg-type]
            h_out: Out | Tmp = Out(1) if last and want[1] else ping[s % 2]
            h_out_bm = bool(cfg.layout) and isinstance(h_out, Out)
            args = [In(0), In(1), In(2), bias]
            step = Data(np.array([s], np.int32))
            if self.op_type == "RNN":
                low.launch(K.rnn_step, [*args, h, lens, step], h_out, h_bm=h_bm,
                           out_bm=h_out_bm, **common)
            elif self.op_type == "GRU":
                rh: Ref = Data(np.zeros(1, np.float32))
                if rh_tmp is not None:
                    rh = rh_tmp
                    low.launch(K.gru_reset, [*args, h, lens, step], rh, h_bm=h_bm, **common)
                low.launch(K.gru_step, [*args, h, rh, lens, step], h_out, h_bm=h_bm,
                           out_bm=h_out_bm, lbr=cfg.lbr, **common)
            else:
                p = opt(7, np.zeros(1, np.float32))
                has_p = len(inputs) > 7 and inputs[7] is not None
                c_out: Out | Tmp = Out(2) if last and want[2] else cping[s % 2]
                c_out_bm = bool(cfg.layout) and isinstance(c_out, Out)
                low.launch(K.lstm_cell, [*args, p, h, c, lens, step], c_out, h_bm=h_bm, c_bm=c_bm,
                           out_bm=c_out_bm, has_p=has_p, input_forget=cfg.input_forget,
                           **common)
                low.launch(K.lstm_hidden, [*args, p, h, c_out, lens, step], h_out, h_bm=h_bm,
                           c_bm=c_out_bm, out_bm=h_out_bm, has_p=has_p, **common)
                c, c_bm = c_out, c_out_bm
            if want[0]:
                y_out: Out | Tmp = Out(0) if last else y_ping[s % 2]
                low.launch(K.append_step, [hist if hist is not None else h_out, h_out, lens, step],
                           y_out, rev0=cfg.reverse0, first=hist is None, h_bm=h_out_bm,
                           out_bm=bool(cfg.layout))
                hist = y_out
            h, h_bm = h_out, h_out_bm
        return low

    def cases(self) -> list[OpCase]:
        return rnn_cases(self)


class RNN(RecurrentOp):
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""

    op_type = "RNN"
    gates, n_acts, default_acts = 1, 1, ("tanh",)


class GRU(RecurrentOp):
    """Gates z, r, h; ``linear_before_reset`` applies r after R_h."""

    op_type = "GRU"
    gates, n_acts, default_acts = 3, 2, ("sigmoid", "tanh")


class LSTM(RecurrentOp):
    """Gates i, o, f, c; peepholes P = [Pi, Po, Pf]; ``input_forget`` couples f = 1 - i."""

    op_type = "LSTM"
    gates, n_acts, default_acts = 4, 3, ("sigmoid", "tanh", "tanh")
    n_states = 2


def rnn_cases(op: RecurrentOp) -> list[OpCase]:
    """Every direction, layout, optional input and activation variant, at small sizes."""
    rng = np.random.default_rng({"RNN": 10, "GRU": 11, "LSTM": 12}[op.op_type])
    seq, batch, n_in, hid = 3, 2, 4, 3
    g = op.gates
    n_out = 2 + (op.op_type == "LSTM")

    def f(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    def inputs(dirs: int, layout: int = 0, bias=True, lens=None, h0=False, extra=()):
        x = f(batch, seq, n_in) if layout else f(seq, batch, n_in)
        st = (batch, dirs, hid) if layout else (dirs, batch, hid)
        args = [x, f(dirs, g * hid, n_in), f(dirs, g * hid, hid),
                f(dirs, 2 * g * hid) if bias else None, lens, f(*st) if h0 else None]
        if op.op_type == "LSTM":
            args += [f(*st) if h0 else None, *extra]
        while args and args[-1] is None:
            args.pop()
        return args

    base = {"hidden_size": hid}
    lens = np.array([3, 1], np.int32)
    cases = [
        OpCase("forward", inputs(1), base, n_outputs=n_out),
        OpCase("no_bias", inputs(1, bias=False), base, n_outputs=n_out),
        OpCase("reverse", inputs(1, h0=True), {**base, "direction": "reverse"}, n_outputs=n_out),
        OpCase("bidirectional", inputs(2, h0=True), {**base, "direction": "bidirectional"},
               n_outputs=n_out),
        OpCase("seq_lens", inputs(2, lens=lens, h0=True), {**base, "direction": "bidirectional"},
               n_outputs=n_out),
        OpCase("layout1", inputs(2, layout=1, h0=True, lens=lens),
               {**base, "layout": 1, "direction": "bidirectional"}, opset=14, n_outputs=n_out),
        OpCase("clip", [a * 4 if a is not None else None for a in inputs(1)],
               {**base, "clip": 0.5}, n_outputs=n_out),
        OpCase("no_hidden_size_attr", inputs(1), {}, n_outputs=n_out),
        OpCase("y_only", inputs(1), base, n_outputs=1),
    ]
    alt = {"RNN": ("LeakyRelu",), "GRU": ("HardSigmoid", "Softsign"),
           "LSTM": ("HardSigmoid", "ScaledTanh", "Affine")}[op.op_type]
    cases.append(OpCase("activations_alpha_beta", inputs(1), {
        **base, "activations": alt, "activation_alpha": (0.3, 0.7, 1.5),
        "activation_beta": (0.4, 0.8, -0.2)}, n_outputs=n_out))
    more = {"RNN": ("Relu", "ThresholdedRelu"), "GRU": ("Elu", "Softplus", "Sigmoid", "Relu"),
            "LSTM": ("Sigmoid", "Elu", "Softplus", "Sigmoid", "Tanh", "Softsign")}[op.op_type]
    cases.append(OpCase("bidirectional_activations", inputs(2), {
        **base, "direction": "bidirectional", "activations": more}, n_outputs=n_out))
    if op.op_type == "GRU":
        cases.append(OpCase("linear_before_reset", inputs(2, h0=True, lens=lens),
                            {**base, "linear_before_reset": 1, "direction": "bidirectional"},
                            n_outputs=n_out))
    if op.op_type == "LSTM":
        p = f(1, 3 * hid)
        cases.append(OpCase("peepholes", inputs(1, h0=True, extra=(p,)), base, n_outputs=3))
        cases.append(OpCase("input_forget", inputs(1, h0=True, extra=(p,)),
                            {**base, "input_forget": 1}, n_outputs=3))
    cases.append(OpCase("size1", [f(1, 1, 1), f(1, g, 1), f(1, g, 1)], {"hidden_size": 1},
                        n_outputs=n_out))
    return cases


OPS: list[type[OpDef]] = [RNN, GRU, LSTM]
