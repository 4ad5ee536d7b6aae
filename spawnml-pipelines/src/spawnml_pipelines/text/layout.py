"""Where a decoder model keeps its KV cache: past/present names, shapes and the strategy.

Discovered from the graph's inputs and outputs (``past_key_values.N.key`` /
``present.N.key`` and the other common spellings), with ``genai_config.json`` naming them
when a folder has one. The cache tensors are [batch, kv_heads, sequence, head_dim].
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import InvalidModelError

PAST_PATTERN = re.compile(r"^(?:past_key_values|past_key_value|past)[._](\d+)[._](key|value)$")
PRESENT_PATTERN = re.compile(r"^(?:present_key_values|present)[._](\d+)[._](key|value)$")
_ONNX_TYPES = {"tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(float)": "float32",
               "tensor(float16)": "float16"}


@dataclass(frozen=True)
class CacheLayout:
    """The decoder's inputs and KV cache layout.

    ``past``/``present``: names in matching order (layer 0 key, layer 0 value, ...);
    ``windowed``: the model honours ``attention_mask`` and ``position_ids`` over a padded
    cache (plain attention), so the cache can be a fixed-capacity window; otherwise (fused
    GroupQueryAttention, which reads lengths from the mask) it grows by one each step."""

    past: tuple[str, ...]
    present: tuple[str, ...]
    kv_heads: int
    head_dim: int
    dtype: DType
    input_ids: str
    logits: str
    input_types: dict[str, str]
    attention_mask: str | None
    position_ids: str | None
    windowed: bool

    @property
    def layers(self) -> int:
        return len(self.past) // 2

    def past_shape(self, length: int) -> tuple[int, int, int, int]:
        return (1, self.kv_heads, length, self.head_dim)


def _by_layer(names: list[str], pattern: re.Pattern[str]) -> dict[tuple[int, str], str]:
    found: dict[tuple[int, str], str] = {}
    for name in names:
        m = pattern.match(name)
        if m:
            found[(int(m.group(1)), m.group(2))] = name
    return found


def _genai_names(genai: dict[str, Any] | None, layers: int) -> tuple[list[str], list[str]] | None:
    decoder = (genai or {}).get("model", {}).get("decoder", {})
    ins, outs = decoder.get("inputs", {}), decoder.get("outputs", {})
    keys = ("past_key_names", "past_value_names", "present_key_names", "present_value_names")
    if not all(k in ins or k in outs for k in keys):
        return None
    past = [ins[k] % i for i in range(layers) for k in ("past_key_names", "past_value_names")]
    present = [outs[k] % i for i in range(layers)
               for k in ("present_key_names", "present_value_names")]
    return past, present


def discover_layout(session: Any, op_types: set[str], genai: dict[str, Any] | None = None,
                    head_dim_hint: int | None = None) -> CacheLayout:
    """The KV layout of ``session``'s model; InvalidModelError naming what is missing."""
    inputs = {a.name: a for a in session.get_inputs()}
    outputs = {a.name: a for a in session.get_outputs()}
    past_map = _by_layer(list(inputs), PAST_PATTERN)
    present_map = _by_layer(list(outputs), PRESENT_PATTERN)
    if not past_map:
        raise InvalidModelError(
            f"the model has no past key/value inputs (inputs: {', '.join(inputs)}); text "
            "generation needs a decoder exported with its KV cache (past_key_values.N.key/value "
            "in, present.N.key/value out), e.g. optimum's text-generation-with-past")
    layers = max(layer for layer, _ in past_map) + 1
    names = _genai_names(genai, layers)
    if names is None:
        missing = [(i, k) for i in range(layers) for k in ("key", "value")
                   if (i, k) not in past_map or (i, k) not in present_map]
        if missing:
            raise InvalidModelError(
                f"past/present key/value pairs incomplete: nothing for layer(s) "
                f"{sorted({i for i, _ in missing})} (outputs: {', '.join(outputs)})")
        names = ([past_map[(i, k)] for i in range(layers) for k in ("key", "value")],
                 [present_map[(i, k)] for i in range(layers) for k in ("key", "value")])
    past, present = names
    shape = inputs[past[0]].shape or []
    if len(shape) != 4:
        raise InvalidModelError(f"{past[0]}: expected [batch, kv_heads, sequence, head_dim], "
                                f"got {shape}")
    kv_heads = shape[1] if isinstance(shape[1], int) else None
    head_dim = shape[3] if isinstance(shape[3], int) else head_dim_hint
    if kv_heads is None or head_dim is None:
        raise InvalidModelError(f"{past[0]}: cannot tell kv_heads/head_dim from {shape}; add a "
                                "config.json or genai_config.json beside the model")
    ids = "input_ids" if "input_ids" in inputs else None
    if ids is None:
        raise InvalidModelError(f"the model has no 'input_ids' input (inputs: {list(inputs)})")
    logits = "logits" if "logits" in outputs else next(iter(outputs))
    mask = "attention_mask" if "attention_mask" in inputs else None
    positions = "position_ids" if "position_ids" in inputs else None
    extra = set(inputs) - set(past) - {ids, mask, positions}
    if extra:
        raise InvalidModelError(f"the model has inputs text generation does not know how to "
                                f"feed: {sorted(extra)}")
    types = {n: _ONNX_TYPES.get(a.type, "int64") for n, a in inputs.items() if n not in past}
    windowed = bool(mask and positions and "GroupQueryAttention" not in op_types)
    return CacheLayout(tuple(past), tuple(present), int(kv_heads), int(head_dim),
                       as_dtype(_ONNX_TYPES.get(inputs[past[0]].type, "float32")), ids,
                       logits, types, mask, positions, windowed)
