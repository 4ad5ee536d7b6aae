"""``torch.onnx.export`` of a Hugging Face causal LM in the optimum decoder layout.

The exported graph takes ``input_ids`` [batch, seq], ``attention_mask`` [batch, past+seq],
``position_ids`` [batch, seq] and ``past_key_values.N.key/value`` [batch, kv_heads, past,
head_dim], and returns ``logits`` [batch, seq, vocab] and ``present.N.key/value``
[batch, kv_heads, past+seq, head_dim]: the layout optimum and transformers.js use.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any


def _wrapper(model: Any) -> Any:
    import torch
    from transformers import DynamicCache

    layers = model.config.num_hidden_layers

    class DecoderWithPast(torch.nn.Module):
        """Flat tensors in and out, a DynamicCache in between."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=self.model.config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, past_key_values=cache, use_cache=True)
            flat = []
            for layer in out.past_key_values.layers:
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    return DecoderWithPast().eval()


def export_decoder(hf_folder: Path, path: Path, opset: int = 17) -> Path:
    """Export the causal LM saved in ``hf_folder`` to ``path`` (TorchScript exporter)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_folder, attn_implementation="eager").eval()
    cfg = model.config
    layers, kv_heads = cfg.num_hidden_layers, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    seq, past_len = 4, 3  # traced with a non-empty past so the Concat path is recorded
    ids = torch.arange(1, seq + 1)[None]
    mask = torch.ones(1, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq)[None]
    past = [torch.randn(1, kv_heads, past_len, head_dim) for _ in range(2 * layers)]
    kv = [f"{i}.{k}" for i in range(layers) for k in ("key", "value")]
    inputs = ["input_ids", "attention_mask", "position_ids", *(f"past_key_values.{n}" for n in kv)]
    outputs = ["logits", *(f"present.{n}" for n in kv)]
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    axes.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in inputs[3:]})
    axes.update({n: {0: "batch_size", 2: "total_sequence_length"} for n in outputs[1:]})
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_wrapper(model), (ids, mask, pos, *past), str(path),
                          input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=opset, dynamo=False)
    return path
