"""A small BERT-style transformer encoder with deterministic random weights.

The graph is written the way exporters write BERT: Gather for embeddings, LayerNormalization,
MatMul + Add dense layers, Reshape/Transpose into heads, scaled scores plus an additive mask
built from ``attention_mask`` (Cast, Sub, Mul, Unsqueeze), Softmax, and GELU spelled with Erf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from .builder import FLOAT, INT64, GraphBuilder


@dataclass(frozen=True)
class EncoderConfig:
    vocab: int = 4096
    hidden: int = 256
    heads: int = 4
    layers: int = 4
    intermediate: int = 1024
    sequence: int = 128
    max_positions: int = 512
    dynamic: bool = False  # symbolic [batch, sequence] inputs, shapes computed in the graph


def _layernorm(b: GraphBuilder, x: str, width: int) -> str:
    scale = b.const("ln_scale", b.uniform((width,), 0.9, 1.1))
    shift = b.const("ln_bias", b.normal((width,), 0.02))
    return b.op("LayerNormalization", [x, scale, shift], axis=-1, epsilon=1e-12)


def _gelu(b: GraphBuilder, x: str) -> str:
    """0.5·x·(1 + erf(x/√2)), the exact GELU as BERT exports it."""
    inv_sqrt2 = b.const("inv_sqrt2", np.array(1 / np.sqrt(2), np.float32))
    one = b.const("one", np.array(1.0, np.float32))
    half = b.const("half", np.array(0.5, np.float32))
    erf = b.op("Erf", [b.op("Mul", [x, inv_sqrt2])])
    return b.op("Mul", [b.op("Mul", [x, half]), b.op("Add", [erf, one])])


def _attention(b: GraphBuilder, x: str, mask: str, cfg: EncoderConfig) -> str:
    head = cfg.hidden // cfg.heads
    lead = [0, 0] if cfg.dynamic else [1, cfg.sequence]  # 0: "copy this dim" (Reshape)
    split = b.ints("split_shape", [*lead, cfg.heads, head])
    merge = b.ints("merge_shape", [*lead, cfg.hidden])

    def heads(perm: list[int]) -> str:
        y = b.op("Reshape", [b.linear(x, cfg.hidden, cfg.hidden), split])
        return b.op("Transpose", [y], perm=perm)

    q = heads([0, 2, 1, 3])  # [1, heads, seq, head]
    k = heads([0, 2, 3, 1])  # [1, heads, head, seq]
    v = heads([0, 2, 1, 3])
    scale = b.const("attn_scale", np.array(np.sqrt(head), np.float32))
    scores = b.op("Add", [b.op("Div", [b.op("MatMul", [q, k]), scale]), mask])
    probs = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    return b.linear(b.op("Reshape", [ctx, merge]), cfg.hidden, cfg.hidden)


def bert_encoder(seed: int = 0, cfg: EncoderConfig | None = None) -> onnx.ModelProto:
    """Inputs ``input_ids``, ``attention_mask`` (int64 [1, seq]); outputs
    ``last_hidden_state`` [1, seq, hidden] and ``pooler_output`` [1, hidden]. With
    ``cfg.dynamic`` the inputs are [batch, sequence] (symbolic) and the position ids come
    from Shape/Range as exporters write them."""
    cfg = cfg or EncoderConfig()
    b = GraphBuilder("bert_encoder", seed)
    words = b.const("word_embeddings", b.normal((cfg.vocab, cfg.hidden), 0.5))
    positions = b.const("position_embeddings", b.normal((cfg.max_positions, cfg.hidden), 0.5))
    if cfg.dynamic:
        length = b.op("Gather", [b.op("Shape", ["input_ids"]),
                                 b.const("seq_axis", np.array(1, np.int64))])  # fmt: skip
        position_ids = b.op("Range", [b.const("zero", np.array(0, np.int64)), length,
                                      b.const("step", np.array(1, np.int64))])  # fmt: skip
    else:
        position_ids = b.ints("position_ids", range(cfg.sequence))
    x = b.op(
        "Add", [b.op("Gather", [words, "input_ids"]), b.op("Gather", [positions, position_ids])]
    )
    x = _layernorm(b, x, cfg.hidden)

    # (1 - mask) · -10000, broadcast over heads and query positions: [1, 1, 1, seq].
    mask = b.op("Cast", ["attention_mask"], to=FLOAT)
    mask = b.op("Sub", [b.const("one", np.array(1.0, np.float32)), mask])
    mask = b.op("Mul", [mask, b.const("neg_big", np.array(-10000.0, np.float32))])
    mask = b.op("Unsqueeze", [mask, b.ints("axes", [1, 2])])

    for _ in range(cfg.layers):
        x = _layernorm(b, b.op("Add", [x, _attention(b, x, mask, cfg)]), cfg.hidden)
        ffn = _gelu(b, b.linear(x, cfg.hidden, cfg.intermediate, gain=2.0))
        x = _layernorm(b, b.op("Add", [x, b.linear(ffn, cfg.intermediate, cfg.hidden)]), cfg.hidden)

    first = b.op("Gather", [x, b.const("cls_index", np.array(0, np.int64))], axis=1)
    pooled = b.op("Tanh", [b.linear(first, cfg.hidden, cfg.hidden)])
    seq: list = ["batch", "sequence"] if cfg.dynamic else [1, cfg.sequence]
    return b.model(
        [("input_ids", INT64, seq), ("attention_mask", INT64, seq)],
        [
            (x, "last_hidden_state", FLOAT, [*seq, cfg.hidden]),
            (pooled, "pooler_output", FLOAT, [seq[0], cfg.hidden]),
        ],
    )
