"""onnxruntime's contrib operators that exported LLMs and transformers use: the
``com.microsoft`` domain (GroupQueryAttention, MultiHeadAttention, MatMulNBits,
RotaryEmbedding, FusedMatMul, Skip(Simplified)LayerNormalization, BiasGelu, FastGelu,
QuickGelu) and SimplifiedLayerNormalization, which onnxruntime registers in the ai.onnx
domain. Each matches onnxruntime's CPU results and lowers to portable kernels, reusing the
attention, normalisation and contraction kernels of the standard ops."""

from __future__ import annotations

from spawnml.op import OpDef

from .activations import OPS as ACTIVATION_OPS
from .fused_matmul import OPS as MATMUL_OPS
from .gqa import OPS as GQA_OPS
from .matmul_nbits import OPS as NBITS_OPS
from .mha import OPS as MHA_OPS
from .norms import OPS as NORM_OPS
from .rotary import OPS as ROTARY_OPS

OPS: list[type[OpDef]] = [*ACTIVATION_OPS, *MATMUL_OPS, *NBITS_OPS, *NORM_OPS, *ROTARY_OPS,
                          *GQA_OPS, *MHA_OPS]
