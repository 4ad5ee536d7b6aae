"""Shapes and launches shared by the scaled dot-product attention ops.

``AttnGeometry`` resolves 3-D / 4-D operands into (batch, heads, sequence, feature) with
four strides each; ``attention_launches`` appends the score, statistics, probability and
output launches (see ``attention_kernels``) to a lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spawnml.dtypes import DType
from spawnml.errors import InvalidModelError
from spawnml.op import Lowering, Node, Ref, Tmp

from .attention_kernels import (
    MASK_NONE,
    attn_output,
    attn_probs,
    attn_row_stats,
    attn_scores,
)

PROBS, SCORES_BIAS, SCORES = 0, 1, 2  # attn_probs modes


@dataclass
class Operand:
    """A (B, H, S, E) view of a 3-D or 4-D tensor: sizes and element strides."""

    heads: int
    seq: int
    feat: int
    strides: tuple[int, int, int, int]


def operand(node: Node, shape: Sequence[int], heads: int | None, what: str) -> Operand:
    """View ``shape`` as (B, heads, S, E): rank 4 as is, rank 3 as (B, S, heads * E)."""
    if len(shape) == 4:
        _, h, s, e = shape
        return Operand(h, s, e, (h * s * e, s * e, e, 1))
    if len(shape) != 3:
        raise InvalidModelError(f"{node.describe()}: {what} must be rank 3 or 4, got {shape}")
    _, s, hidden = shape
    if not heads or heads < 1 or hidden % heads:
        raise InvalidModelError(f"{node.describe()}: {what} hidden size {hidden} is not a "
                                f"multiple of the head count {heads}")
    e = hidden // heads
    return Operand(heads, s, e, (s * hidden, e, hidden, 1))


@dataclass
class Bias:
    """What makes up the additive bias: constants of ``attn_bias``."""

    mask_mode: int = MASK_NONE
    m_st: tuple[int, int, int, int] = (0, 0, 0, 0)
    m_len: int = 0
    has_nonpad: bool = False
    causal: bool = False
    past_len: int = 0
    left: int = -1
    right: int = -1

    def consts(self) -> dict:
        return dict(mask_mode=self.mask_mode, m_st=self.m_st, m_len=self.m_len,
                    has_nonpad=self.has_nonpad, causal=self.causal, past_len=self.past_len,
                    left=self.left, right=self.right)


def mask_strides(shape: Sequence[int]) -> tuple[int, int, int, int]:
    """Strides of a mask right-aligned against (B, H, Sq, Skv); broadcast axes get 0."""
    strides = [0, 0, 0, 0]
    acc = 1
    for k in range(1, len(shape) + 1):
        if shape[-k] != 1:
            strides[-k] = acc
        acc *= shape[-k]
    return tuple(strides)  # type: ignore[return-value]


@dataclass
class AttnPlan:
    """The refs and sizes one attention computation needs."""

    q: Ref
    k: Ref
    v: Ref
    q_op: Operand
    k_st: tuple[int, int, int, int]
    v_st: tuple[int, int, int, int]
    batch: int
    kv_heads: int
    kv_len: int
    v_head: int
    scale: float  # already the square root applied to each of Q and K
    softcap: float = 0.0
    half: bool = False  # float16 inputs: round the scores as the reference does
    half_softmax: bool = False  # ... and the softmax terms (no softmax_precision)
    probs_dtype: DType = DType.float32
    mask: Ref | None = None
    nonpad: Ref | None = None
    bias: Bias = field(default_factory=Bias)


def attention_launches(low: Lowering, p: AttnPlan, y: Ref) -> tuple[Tmp, Tmp, Tmp]:
    """Scores, statistics, probabilities and output launches; returns the (scores, stats,
    probs) temporaries for extra outputs."""
    hq, lq = p.q_op.heads, p.q_op.seq
    group = hq // p.kv_heads
    scores = low.temp(DType.float32, (p.batch, hq, lq, p.kv_len))
    low.launch(attn_scores, [p.q, p.k], scores, q_st=p.q_op.strides, k_st=p.k_st, group=group,
               head=p.q_op.feat, scale_sqrt=p.scale, softcap=p.softcap, half=p.half)
    extra = [p.mask or p.q, p.nonpad or p.q]
    stats = low.temp(DType.float32, (p.batch, hq, lq, 2))
    low.launch(attn_row_stats, [scores, *extra], stats, half=p.half, half_sm=p.half_softmax,
               **p.bias.consts())
    probs = low.temp(p.probs_dtype, (p.batch, hq, lq, p.kv_len))
    low.launch(attn_probs, [scores, stats, *extra], probs, mode=PROBS, half=p.half,
               half_sm=p.half_softmax, **p.bias.consts())
    low.launch(attn_output, [probs, p.v], y, v_st=p.v_st, group=group, heads=hq,
               v_head=p.v_head)  # type: ignore[arg-type]
    return scores, stats, probs
