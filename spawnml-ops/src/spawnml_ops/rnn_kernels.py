"""Kernels of the recurrent ops (RNN, GRU, LSTM): one launch per time step computes the
new state of every direction from the previous one (ping-pong temporaries); a second
launch per step appends it to the output sequence Y. Gates are computed inside the
kernels; all arithmetic is f32.

State tensors between steps are [dirs, batch, hidden]; ``*_bm`` flags say a tensor is
batch-major instead (ONNX ``layout=1``: X [batch, seq, in], states [batch, dirs, hidden])."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from spawnml.kernel import Output, Tensor, cast, f32, helper, i32, kernel

ACTIVATIONS = {
    "relu": 0, "tanh": 1, "sigmoid": 2, "affine": 3, "leakyrelu": 4, "thresholdedrelu": 5,
    "scaledtanh": 6, "hardsigmoid": 7, "elu": 8, "softsign": 9, "softplus": 10,
}
"""Activation name (lower case) -> code used by ``activate``."""
ALPHA_BETA_DEFAULTS = {  # code -> (alpha, beta) defaults; absent: takes neither
    3: (1.0, 0.0), 4: (0.01, None), 5: (1.0, None), 6: (1.0, 1.0), 7: (0.2, 0.5), 8: (1.0, None),
}


@helper
def activate(v, code, alpha, beta):
    """ONNX activation ``code`` (see ACTIVATIONS) with its alpha/beta."""
    r = v
    if code == 0:
        r = max(v, 0.0)
    elif code == 1:
        r = tanh(v)
    elif code == 2:
        r = 1.0 / (1.0 + exp(-v))
    elif code == 3:
        r = alpha * v + beta
    elif code == 4:
        r = v if v >= 0.0 else alpha * v
    elif code == 5:
        r = v if v > alpha else 0.0
    elif code == 6:
        r = alpha * tanh(beta * v)
    elif code == 7:
        r = max(0.0, min(1.0, alpha * v + beta))
    elif code == 8:
        r = v if v >= 0.0 else alpha * (exp(v) - 1.0)
    elif code == 9:
        r = v / (1.0 + abs(v))
    else:
        r = max(v, 0.0) + log(1.0 + exp(-abs(v)))
    return r


@helper
def act(v, d, slot, acts, clip):
    """Activation number ``slot`` of direction ``d``. ``acts`` is (n, then (code, alpha,
    beta) for each of the n activations of direction 0, then of direction 1 if present).
    Clipping (when ``clip`` > 0) applies to the activation's input."""
    u = v
    if clip > 0.0:
        u = min(max(v, -clip), clip)
    r = activate(u, acts[1 + 3 * slot], acts[2 + 3 * slot], acts[3 + 3 * slot])
    if len(acts) > 1 + 3 * acts[0]:
        r = activate(u, acts[1 + 3 * (acts[0] + slot)], acts[2 + 3 * (acts[0] + slot)],
                     acts[3 + 3 * (acts[0] + slot)]) if d == 1 else r
    return r


@helper
def x_at(x, t, b, i, bm):
    off = 0
    if bm:
        off = b * x.strides[0] + t * x.strides[1] + i
    else:
        off = t * x.strides[0] + b * x.strides[1] + i
    return cast(x.flat[off], f32)


@helper
def state_at(h, d, b, k, bm):
    """Element (direction d, batch b, unit k) of a state tensor."""
    off = 0
    if bm:
        off = b * h.strides[0] + d * h.strides[1] + k
    else:
        off = d * h.strides[0] + b * h.strides[1] + k
    return cast(h.flat[off], f32)


@helper
def out_dbj(out, bm):
    """(direction, batch, unit) of this element of a state-shaped output."""
    d = out.index[0]
    b = out.index[1]
    if bm:
        d = out.index[1]
        b = out.index[0]
    return d, b, out.index[2]


@helper
def step_time(lens, step, d, b, seq, dirs, rev0):
    """(time index that step number ``step.flat[0]`` processes for direction d, whether it
    is inside batch b's sequence length). The step is a tensor so that one compiled
    program serves every step."""
    rev = rev0
    if dirs == 2:
        rev = d == 1
    s = step.flat[0]
    tt = seq - 1 - s if rev else s
    return tt, tt < cast(lens.flat[b], i32)


@helper
def x_part(x, w, bias, d, b, tt, row, rows, x_bm, has_bias):
    """X_t . W[row] + Wb[row]."""
    acc = 0.0
    n_in = x.shape[2]
    w0 = (d * rows + row) * n_in
    for i in range(n_in):
        acc = acc + x_at(x, tt, b, i, x_bm) * cast(w.flat[w0 + i], f32)
    if has_bias:
        acc = acc + cast(bias.flat[d * 2 * rows + row], f32)
    return acc


@helper
def h_part(r, bias, h, d, b, row, rows, hsz, h_bm, has_bias):
    """H_{t-1} . R[row] + Rb[row]."""
    acc = 0.0
    r0 = (d * rows + row) * hsz
    for k in range(hsz):
        acc = acc + state_at(h, d, b, k, h_bm) * cast(r.flat[r0 + k], f32)
    if has_bias:
        acc = acc + cast(bias.flat[d * 2 * rows + rows + row], f32)
    return acc


@kernel
def rnn_step(x: Tensor, w: Tensor, r: Tensor, bias: Tensor, h: Tensor, lens: Tensor,
             step: Tensor, out: Output, rev0: bool, x_bm: bool, h_bm: bool, out_bm: bool,
             has_bias: bool, acts: tuple, clip: float):
    d, b, j = out_dbj(out, out_bm)
    hsz = r.shape[2]
    dirs = w.shape[0]
    tt, live = step_time(lens, step, d, b, x.shape[1] if x_bm else x.shape[0], dirs, rev0)
    prev = state_at(h, d, b, j, h_bm)
    v = 0.0
    if live:
        v = act(x_part(x, w, bias, d, b, tt, j, hsz, x_bm, has_bias)
                + h_part(r, bias, h, d, b, j, hsz, hsz, h_bm, has_bias), d, 0, acts, clip)
    else:
        v = prev
    return cast(v, out.dtype)


@kernel
def gru_reset(x: Tensor, w: Tensor, r: Tensor, bias: Tensor, h: Tensor, lens: Tensor,
              step: Tensor, out: Output, rev0: bool, x_bm: bool, h_bm: bool, has_bias: bool,
              acts: tuple, clip: float):
    """r_t * H_{t-1} (linear_before_reset = 0), state-shaped [dirs, batch, hidden]."""
    d, b, j = out_dbj(out, False)
    hsz = r.shape[2]
    rows = 3 * hsz
    tt, _ = step_time(lens, step, d, b, x.shape[1] if x_bm else x.shape[0], w.shape[0],
                      rev0)
    pre = x_part(x, w, bias, d, b, tt, hsz + j, rows, x_bm, has_bias) \
        + h_part(r, bias, h, d, b, hsz + j, rows, hsz, h_bm, has_bias)
    return cast(act(pre, d, 0, acts, clip) * state_at(h, d, b, j, h_bm), out.dtype)


@kernel
def gru_step(x: Tensor, w: Tensor, r: Tensor, bias: Tensor, h: Tensor, rh: Tensor,
             lens: Tensor, step: Tensor, out: Output, rev0: bool, x_bm: bool, h_bm: bool,
             out_bm: bool, has_bias: bool, acts: tuple, clip: float, lbr: bool):
    d, b, j = out_dbj(out, out_bm)
    hsz = r.shape[2]
    rows = 3 * hsz
    tt, live = step_time(lens, step, d, b, x.shape[1] if x_bm else x.shape[0], w.shape[0],
                         rev0)
    prev = state_at(h, d, b, j, h_bm)
    v = prev
    if live:
        z = act(x_part(x, w, bias, d, b, tt, j, rows, x_bm, has_bias)
                + h_part(r, bias, h, d, b, j, rows, hsz, h_bm, has_bias), d, 0, acts, clip)
        hx = x_part(x, w, bias, d, b, tt, 2 * hsz + j, rows, x_bm, has_bias)
        n = 0.0
        if lbr:
            rg = act(x_part(x, w, bias, d, b, tt, hsz + j, rows, x_bm, has_bias)
                     + h_part(r, bias, h, d, b, hsz + j, rows, hsz, h_bm, has_bias),
                     d, 0, acts, clip)
            n = act(hx + rg * h_part(r, bias, h, d, b, 2 * hsz + j, rows, hsz, h_bm, has_bias),
                    d, 1, acts, clip)
        else:
            n = act(hx + h_part(r, bias, rh, d, b, 2 * hsz + j, rows, hsz, False, has_bias),
                    d, 1, acts, clip)
        v = (1.0 - z) * n + z * prev
    return cast(v, out.dtype)


@helper
def peephole(p, d, k, hsz, has_p):
    v = 0.0
    if has_p:
        v = cast(p.flat[d * 3 * hsz + k], f32)
    return v


@kernel
def lstm_cell(x: Tensor, w: Tensor, r: Tensor, bias: Tensor, p: Tensor, h: Tensor, c: Tensor,
              lens: Tensor, step: Tensor, out: Output, rev0: bool, x_bm: bool, h_bm: bool,
              c_bm: bool, out_bm: bool, has_bias: bool, has_p: bool, acts: tuple, clip: float,
              input_forget: bool):
    """C_t = f_t * C_{t-1} + i_t * g(c_t) (gates i, o, f, c in W/R; peepholes i, o, f)."""
    d, b, j = out_dbj(out, out_bm)
    hsz = r.shape[2]
    rows = 4 * hsz
    tt, live = step_time(lens, step, d, b, x.shape[1] if x_bm else x.shape[0], w.shape[0],
                         rev0)
    cp = state_at(c, d, b, j, c_bm)
    v = cp
    if live:
        i_g = act(x_part(x, w, bias, d, b, tt, j, rows, x_bm, has_bias)
                  + h_part(r, bias, h, d, b, j, rows, hsz, h_bm, has_bias)
                  + peephole(p, d, j, hsz, has_p) * cp, d, 0, acts, clip)
        f_g = 1.0 - i_g
        if not input_forget:
            f_g = act(x_part(x, w, bias, d, b, tt, 2 * hsz + j, rows, x_bm, has_bias)
                      + h_part(r, bias, h, d, b, 2 * hsz + j, rows, hsz, h_bm, has_bias)
                      + peephole(p, d, 2 * hsz + j, hsz, has_p) * cp, d, 0, acts, clip)
        c_g = act(x_part(x, w, bias, d, b, tt, 3 * hsz + j, rows, x_bm, has_bias)
                  + h_part(r, bias, h, d, b, 3 * hsz + j, rows, hsz, h_bm, has_bias),
                  d, 1, acts, clip)
        v = f_g * cp + i_g * c_g
    return cast(v, out.dtype)


@kernel
def lstm_hidden(x: Tensor, w: Tensor, r: Tensor, bias: Tensor, p: Tensor, h: Tensor,
                c_new: Tensor, lens: Tensor, step: Tensor, out: Output, rev0: bool, x_bm: bool,
                h_bm: bool, c_bm: bool, out_bm: bool, has_bias: bool, has_p: bool,
                acts: tuple, clip: float):
    """H_t = o_t * h(C_t)."""
    d, b, j = out_dbj(out, out_bm)
    hsz = r.shape[2]
    rows = 4 * hsz
    tt, live = step_time(lens, step, d, b, x.shape[1] if x_bm else x.shape[0], w.shape[0],
                         rev0)
    v = state_at(h, d, b, j, h_bm)
    if live:
        cn = state_at(c_new, d, b, j, c_bm)
        o_g = act(x_part(x, w, bias, d, b, tt, hsz + j, rows, x_bm, has_bias)
                  + h_part(r, bias, h, d, b, hsz + j, rows, hsz, h_bm, has_bias)
                  + peephole(p, d, hsz + j, hsz, has_p) * cn, d, 0, acts, clip)
        v = o_g * act(cn, d, 2, acts, 0.0)
    return cast(v, out.dtype)


@kernel
def append_step(hist: Tensor, h: Tensor, lens: Tensor, step: Tensor, out: Output,
                rev0: bool, first: bool, h_bm: bool, out_bm: bool):
    """Y with this step's states written at their time index (0 beyond a sequence's
    length); Y is [seq, dirs, batch, hidden], or [batch, seq, dirs, hidden] (``out_bm``)."""
    t = out.index[0]
    b = out.index[2]
    if out_bm:
        t = out.index[1]
        b = out.index[0]
    d = out.index[2]
    if not out_bm:
        d = out.index[1]
    j = out.index[3]
    seq = out.shape[1] if out_bm else out.shape[0]
    dirs = out.shape[2] if out_bm else out.shape[1]
    tt, live = step_time(lens, step, d, b, seq, dirs, rev0)
    v = 0.0
    if t == tt:
        v = state_at(h, d, b, j, h_bm) if live else 0.0
    elif not first:
        v = cast(hist.flat[out.flat], f32)
    return cast(v, out.dtype)
