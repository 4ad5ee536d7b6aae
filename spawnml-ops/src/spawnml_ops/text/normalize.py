"""StringNormalizer: drop stop words, then change case ([C] or [1, C] string tensors)."""

from __future__ import annotations

import numpy as np

from spawnml.op import OpCase, OpDef, TensorInfo

from .common import STRING, as_str, string_input, strings

_CASE_ACTIONS = ("NONE", "LOWER", "UPPER")


class StringNormalizer(OpDef):
    """ONNX StringNormalizer (onnxruntime's semantics): elements equal to a stop word
    (compared case-insensitively unless ``is_case_sensitive``) are removed; what remains
    is lower/upper-cased by ``case_change_action``. All removed: one empty string."""

    op_type = "StringNormalizer"
    since_version = 10
    host_only = True

    def _action(self, node) -> str:
        action = self.attr(node, "case_change_action", "NONE")
        if action not in _CASE_ACTIONS:
            raise self.fail(node, f"case_change_action must be one of {_CASE_ACTIONS}, got "
                                  f"{action!r}")
        return action

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        x = string_input(self, node, inputs)
        self._action(node)
        if x.shape is not None and not (len(x.shape) == 1 or (len(x.shape) == 2
                                                                and x.shape[0] in (1, None))):
            raise self.fail(node, f"input X must have shape [C] or [1, C], got {x.shape}")
        rank = 2 if x.shape is not None and len(x.shape) == 2 else 1
        return [TensorInfo(STRING, (1, None) if rank == 2 else (None,))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        x = as_str(inputs[0])
        if (x.ndim == 2 and x.shape[0] != 1) or x.ndim not in (1, 2):
            raise self.fail(node, f"input X must have shape [C] or [1, C], got {x.shape}")
        action = self._action(node)
        sensitive = bool(int(self.attr(node, "is_case_sensitive", 0)))
        stops = list(self.attr(node, "stopwords", ()) or ())
        fold = (lambda s: s) if sensitive else (lambda s: s.lower())
        stop_set = {fold(s) for s in stops}
        kept = [s for s in x.reshape(-1) if fold(s) not in stop_set]
        if action == "LOWER":
            kept = [s.lower() for s in kept]
        elif action == "UPPER":
            kept = [s.upper() for s in kept]
        kept = kept or [""]
        return [strings((1, len(kept)) if x.ndim == 2 else (len(kept),), kept)]

    def cases(self) -> list[OpCase]:
        x = strings((4,), ["Monday", "tuesday", "MONDAY", "Wednesday"])
        return [
            OpCase("lower_stop_insensitive", [x], {"case_change_action": "LOWER",
                                                   "stopwords": ("monday",)}),
            OpCase("upper_stop_sensitive", [x.reshape(1, 4)], {
                "case_change_action": "UPPER", "is_case_sensitive": 1,
                "stopwords": ("monday",)}),
            OpCase("all_removed", [x[[0, 2]]], {"stopwords": ("MONDAY",)}),
        ]
